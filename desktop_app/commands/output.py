"""Exit codes and JSON/error output shared by the commands."""
from __future__ import annotations

import argparse
import json
import sys

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def emit_json(doc: dict) -> None:
    print(json.dumps(doc, indent=2))


def fail(args: argparse.Namespace, message: str, code: int) -> int:
    """Report an error: a JSON document on stdout when --json was given, one line on stderr always."""
    if getattr(args, "json", False):
        emit_json({"ok": False, "error": message})
    print(f"tandem: error: {message}", file=sys.stderr)
    return code
