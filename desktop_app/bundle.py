"""What a frozen bundle says about itself: packaging/build.py writes bundle.json beside this module
(which llama.cpp build it carries: for the build machine's CPU, or portable, and the CPU features it
was compiled for), and `tandem --version` and `tandem doctor` show it. From a checkout or a pip
install there is none."""
from __future__ import annotations

import argparse
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
    """One line: how the bundle's llama.cpp was built, and what a CPU needs to run it."""
    how = ("portable llama.cpp build (GGML_NATIVE=OFF)" if record.get("llama_build") == "portable"
           else "llama.cpp built for the build machine's CPU (GGML_NATIVE=ON)")
    needs = record.get("cpu_features")
    return how + (f"; needs a CPU with {needs}" if needs else "")


def version_text(version: str) -> str:
    record = info()
    return f"tandem {version}" + (f" (bundle of {record.get('built', '?')}: {describe(record)})" if record else "")


class VersionAction(argparse.Action):
    """`--version`: one line, never wrapped (argparse's own version action wraps it to the terminal)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS, help=None):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        from desktop_app import __version__

        print(version_text(__version__))
        parser.exit()
