"""`tandem doctor`: versions, CPU, llama.cpp build, weight repacking and folders, for a bug report."""
from __future__ import annotations

import argparse
import sys

from desktop_app.commands.output import EXIT_FAIL, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, emit_json, fail


def run(args: argparse.Namespace) -> int:
    from desktop_app.diagnostics import format_text, gather

    if args.reprobe and args.no_probe:
        return fail(args, "--reprobe and --no-probe contradict each other", EXIT_USAGE)
    try:
        doc = gather(no_repack=args.no_repack, probe=not args.no_probe, reprobe=args.reprobe)
    except KeyboardInterrupt:
        return fail(args, "interrupted", EXIT_INTERRUPTED)
    except Exception as exc:  # gather() reports broken parts itself; this is a last resort, never a traceback
        return fail(args, f"could not gather the report: {type(exc).__name__}: {exc}", EXIT_FAIL)
    if args.json:
        emit_json(doc)
    else:
        print(format_text(doc))
        if doc["repack"].get("notice"):
            print(f"\nnote: {doc['repack']['notice']}", file=sys.stderr)
    return EXIT_OK
