"""What a frozen bundle says about itself: packaging/build.py writes bundle.json beside this module
(which llama.cpp build it carries: for the build machine's CPU, or portable), and `tandem --version`
and `tandem doctor` show it. From a checkout or a pip install there is none."""
from __future__ import annotations

import json
import sys
from pathlib import Path

INFO_FILE = Path(__file__).with_name("bundle.json")


def info() -> dict | None:
    """The bundle's build record, or None when not running from a bundle."""
    if not getattr(sys, "frozen", False) or not INFO_FILE.exists():
        return None
    try:
        return json.loads(INFO_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def describe(record: dict) -> str:
    """One line: how the bundle's llama.cpp was built and the CPUs it runs on."""
    if record.get("llama_build") == "portable":
        cpus = "portable (GGML_NATIVE=OFF): x86-64 CPUs with " + record.get("cpu_baseline", "AVX2")
    else:
        cpus = "native (GGML_NATIVE=ON): CPUs with the build machine's instruction sets"
    features = record.get("cpu_features")
    return f"llama.cpp {cpus}" + (f"; compiled for {features}" if features else "")


def version_text(version: str) -> str:
    record = info()
    return f"tandem {version}" + (f" (bundle built {record.get('built', '?')}; {describe(record)})" if record else "")
