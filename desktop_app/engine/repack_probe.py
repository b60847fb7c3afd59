"""The CPU probe's child process: `tandem --repack-probe MODEL THREADS` (see engine/repack.py).

Loads the probe model twice, plain and with weight repacking (llama.cpp's extra buffer types:
CPU_REPACK, AMX, ...), decodes a batch of several tokens and then one token with each, and checks
that the repacked logits match the plain ones. Where the repacked kernels fault (llama.cpp issue
#20824), this process dies and the parent, still alive, turns repacking off, or first, on a CPU with
AMX, runs this probe again with AMX kept out (engine/amx.py).

Exit codes: 0 passed (one JSON line on stdout), 3 the probe itself could not run (not a verdict),
4 repacked weights failed to load or evaluate, 5 repacked logits differ from plain ones. A fault
ends the process by a signal. Each step is announced on stderr first, so the parent can say
where it died.
"""
from __future__ import annotations

import ctypes
import faulthandler
import json
import re
import sys
import time

EXIT_UNAVAILABLE, EXIT_FAILED, EXIT_WRONG = 3, 4, 5
BATCH = 40                       # more than one 32-row AMX block, so both the full and the partial path run
TOLERANCE = 1e-2                 # relative to the largest plain logit: only garbage fails, never rounding

_log: list[str] = []


def _step(text: str) -> None:
    print(f"step: {text}", file=sys.stderr, flush=True)


def _evaluate(model_path: str, threads: int, repack: bool):
    import numpy as np

    from desktop_app.engine import backend

    ptr = backend.load_model_ptr(model_path, use_extra_bufts=repack)
    if not ptr:
        return None
    model = backend.Model(ptr, model_path, False)
    ctx = backend.Context(model, 128, threads, n_batch=64)
    try:
        what = "repacked" if repack else "plain"
        _step(f"decoding a batch of {BATCH} tokens with {what} weights")
        ctx.eval(list(range(3, 3 + BATCH)), logits="all")
        batch = np.array([ctx.logits(i) for i in range(BATCH)])
        _step(f"decoding one token with {what} weights")
        ctx.eval([3 + BATCH], logits="last")
        return np.vstack([batch, ctx.logits(-1)[None, :]])
    finally:
        ctx.close()
        model.close()


def main(argv: list[str]) -> int:
    faulthandler.enable()
    model_path, threads = argv[0], int(argv[1])
    t0 = time.monotonic()
    try:
        import llama_cpp as L
        import numpy as np

        from desktop_app.engine import backend

        backend.init_backend()

        @L.llama_log_callback
        def keep_log(_level, text, _user_data):
            _log.append(text.decode("utf-8", errors="replace"))

        L.llama_log_set(keep_log, ctypes.c_void_p(0))
        _step("loading the probe model plain")
        plain = _evaluate(model_path, 1, repack=False)        # the reference: one thread is enough
        if plain is None:
            print(f"the probe model did not load: {''.join(_log[-3:]).strip()}", file=sys.stderr)
            return EXIT_UNAVAILABLE
    except Exception as exc:  # a broken install, not a verdict on the CPU
        print(f"the probe could not run: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    _log.clear()
    _step("loading the probe model with repacked weights")
    try:
        repacked = _evaluate(model_path, threads, repack=True)
    except backend.BackendError as exc:
        print(f"repacked weights failed: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if repacked is None:
        print(f"the probe model did not load with repacked weights: {''.join(_log[-3:]).strip()}", file=sys.stderr)
        return EXIT_FAILED
    log = "".join(_log)
    diff = float(np.abs(repacked - plain).max())
    scale = float(np.abs(plain).max()) or 1.0
    if not np.isfinite(repacked).all() or diff > TOLERANCE * scale:
        print(f"repacked weights give different logits: largest difference {diff:.3g} "
              f"(largest logit {scale:.3g})", file=sys.stderr)
        return EXIT_WRONG
    print(json.dumps({"ok": True, "seconds": round(time.monotonic() - t0, 3), "max_abs_diff": diff,
                      "buffers": sorted(set(re.findall(r"(\S+) model buffer size", log))),
                      "kernels": sorted(set(re.findall(r"repack tensor \S+ with (\S+)", log))
                                        | {f"amx {t}" for t in re.findall(r"amx repack tensor \S+ of type (\S+)", log)})}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
