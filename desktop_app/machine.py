"""What the CPU is and what llama.cpp was built with: the facts that decide which kernels run.

Importing this module loads nothing; only llama_build() loads llama.cpp."""
from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import subprocess

# CPU flags (as /proc/cpuinfo names them) that change which llama.cpp kernels run, or how safely.
RELEVANT_FLAGS = ("avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
                  "avx_vnni", "amx_tile", "amx_int8", "amx_bf16", "amx_fp16", "hypervisor",
                  "asimd", "asimddp", "i8mm", "sve", "sve2", "bf16")
CPUINFO = "/proc/cpuinfo"


def _cpuinfo_fields(path: str = CPUINFO) -> dict[str, str]:
    """The first processor's `key: value` lines of /proc/cpuinfo ({} where there is none)."""
    fields: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if not line.strip():
                    if fields:
                        break
                    continue
                key, _, value = line.partition(":")
                fields.setdefault(key.strip().lower(), value.strip())
    except OSError:
        pass
    return fields


@functools.lru_cache(maxsize=1)
def cpu_model() -> str:
    fields = _cpuinfo_fields()
    for key in ("model name", "hardware", "cpu model", "processor"):
        value = fields.get(key, "")
        if value and not value.isdigit():
            return value
    if platform.system() == "Darwin":
        try:
            out = subprocess.run(["sysctl", "-n", "machdep.cpu.brand_string"], capture_output=True, text=True,
                                 timeout=5).stdout.strip()
            if out:
                return out
        except (OSError, subprocess.SubprocessError):
            pass
    return platform.processor() or platform.machine() or "unknown"


@functools.lru_cache(maxsize=1)
def cpu_flags() -> tuple[str, ...]:
    """The relevant flags this CPU has (empty where /proc/cpuinfo does not list them)."""
    fields = _cpuinfo_fields()
    present = set((fields.get("flags") or fields.get("features") or "").split())
    return tuple(f for f in RELEVANT_FLAGS if f in present)


def parse_system_info(text: str) -> dict[str, dict[str, str]]:
    """llama_print_system_info()'s `CPU : AVX2 = 1 | REPACK = 1 | CUDA : ARCHS = 890 | ...` as
    {"CPU": {"AVX2": "1", "REPACK": "1"}, "CUDA": {"ARCHS": "890"}}."""
    backends: dict[str, dict[str, str]] = {}
    current = None
    for part in text.split("|"):
        part = part.strip()
        if not part:
            continue
        if " : " in part or part.endswith(" :"):
            name, _, part = part.partition(":")
            current = backends.setdefault(name.strip(), {})
            part = part.strip()
            if not part:
                continue
        key, sep, value = part.partition("=")
        if current is None:
            current = backends.setdefault("", {})
        current[key.strip()] = value.strip() if sep else ""
    return backends


@functools.lru_cache(maxsize=1)
def llama_build() -> dict:
    """llama-cpp-python's version and what its llama.cpp was built with (loads llama.cpp)."""
    import llama_cpp as L

    from desktop_app.engine.backend import init_backend

    init_backend()
    text = (L.llama_print_system_info() or b"").decode("utf-8", errors="replace").strip()
    return {"version": L.__version__, "system_info": text, "backends": parse_system_info(text),
            "gpu_offload": bool(L.llama_supports_gpu_offload()), "rpc": bool(L.llama_supports_rpc()),
            "mmap": bool(L.llama_supports_mmap())}


def machine_facts() -> dict:
    """What a remembered probe verdict is valid for: this CPU and this llama.cpp build."""
    build = llama_build()
    return {"cpu": cpu_model(), "flags": list(cpu_flags()), "arch": platform.machine(), "os": platform.system(),
            "llama_cpp": build["version"], "system_info": build["system_info"]}


def machine_key(facts: dict | None = None) -> str:
    facts = facts if facts is not None else machine_facts()
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:16]


def logical_cores() -> int:
    return os.cpu_count() or 1
