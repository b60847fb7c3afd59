"""Import hygiene: the engine's pure-numpy modules load without llama.cpp, and the package's
re-exports still resolve."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import desktop_app.engine as engine

PURE = ("rejection", "sampling", "events", "settings", "costs", "metrics", "explain", "number_text", "pair_rules",
        "auto_policy", "replaced_tokens")   # (explain quotes when auto first weighs a draft model)


def test_pure_modules_import_where_llama_cpp_cannot():
    """A process in which `import llama_cpp` fails (as in a window process that never loads models)
    imports every pure module, and llama.cpp stays unloaded."""
    script = textwrap.dedent(f"""
        import sys
        sys.modules["llama_cpp"] = None          # any import of llama_cpp now raises ImportError
        try:
            import llama_cpp
        except ImportError:
            pass
        else:
            raise SystemExit("the block on llama_cpp did not hold")
        import importlib
        for name in {PURE!r}:
            importlib.import_module("desktop_app.engine." + name)
        from desktop_app.engine import GREEDY, Controls, GenerationStats, RoundEvent, SamplingParams, SpecSettings
        assert sys.modules["llama_cpp"] is None, "something replaced the block"
        loaded = sorted(m for m in sys.modules if m.startswith("desktop_app.engine."))
        assert "desktop_app.engine.backend" not in loaded, loaded
        print(" ".join(loaded))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == sorted(f"desktop_app.engine.{name}" for name in PURE)


def test_every_exported_name_resolves():
    for name in engine.__all__:
        value = getattr(engine, name)
        assert getattr(value, "__name__", name) == name or name == "GREEDY"
    assert set(engine.__all__) <= set(dir(engine))
    from desktop_app.engine import ModelPair, check_pair    # the llama.cpp side, loaded on demand
    assert ModelPair.__module__ == "desktop_app.engine.pair" and check_pair.__module__ == "desktop_app.engine.compat"
    try:
        engine.no_such_name
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown name resolved")
