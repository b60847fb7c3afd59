"""The `tandem` command: `gui` (default), `generate`, `bench`, `models`."""
from __future__ import annotations

import argparse
import json
import sys
import time

from desktop_app import __version__

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class TerminalProgress:
    """A one-line progress bar on stderr (bytes assembled / total); plain lines when not a tty."""

    def __init__(self, stream=sys.stderr, width: int = 30):
        self.stream = stream
        self.width = width
        self.tty = stream.isatty()
        self._last = 0.0
        self._last_line = ""

    def __call__(self, p) -> None:
        if self.tty:
            now = time.monotonic()
            if p.stage not in ("done", "download") and now - self._last < 0.1:
                return
            self._last = now
            frac = p.done_bytes / p.total_bytes if p.total_bytes else 0.0
            bar = "#" * int(frac * self.width)
            line = (f"\r{p.model:<22} [{bar:<{self.width}}] {p.done_bytes / 1e6:8.1f}/"
                    f"{p.total_bytes / 1e6:.1f} MB  {p.stage} {p.part}/{p.parts}")
            self.stream.write(line)
            if p.stage == "done":
                self.stream.write("\n")
            self.stream.flush()
        elif p.stage in ("download", "verify", "done"):
            line = f"{p.model}: {p.stage} {p.part}/{p.parts} ({p.done_bytes / 1e6:.1f}/{p.total_bytes / 1e6:.1f} MB)"
            if line != self._last_line:
                print(line, file=self.stream, flush=True)
                self._last_line = line


def _emit_json(doc: dict) -> None:
    print(json.dumps(doc, indent=2))


def cmd_models(args: argparse.Namespace) -> int:
    from desktop_app import models

    if args.models_command == "list":
        rows = [models.inspect(m, deep=args.verify) for m in models.MODELS.values()]
        if args.json:
            _emit_json({"ok": True, "folder": str(models.models_dir()), "models": [r.to_json() for r in rows]})
        else:
            print(f"models folder: {models.models_dir()}")
            for r in rows:
                state = ("verified" if r.verified else "NOT verified") if r.present else "not fetched"
                size = f"{r.size / 1e6:8.1f} MB" if r.present else " " * 11
                print(f"  {r.key:<20} {size}  {state:<13} {r.path if r.present else r.description}")
        return EXIT_OK

    # fetch
    try:
        wanted = models.resolve(args.names)
    except KeyError as exc:
        return _fail(args, exc.args[0], EXIT_USAGE)
    progress = None if args.json else TerminalProgress()
    fetched = []
    try:
        for model in wanted:
            models.fetch(model, progress=progress)
            fetched.append(models.inspect(model))
    except models.FetchError as exc:
        return _fail(args, str(exc), EXIT_FAIL)
    except KeyboardInterrupt:
        return _fail(args, "fetch interrupted; nothing was left under a final file name", EXIT_INTERRUPTED)
    if args.json:
        _emit_json({"ok": True, "models": [r.to_json() for r in fetched]})
    else:
        for r in fetched:
            print(f"{r.key}: {r.path} (verified)")
    return EXIT_OK


def _fail(args: argparse.Namespace, message: str, code: int) -> int:
    if getattr(args, "json", False):
        _emit_json({"ok": False, "error": message})
    print(f"tandem: error: {message}", file=sys.stderr)
    return code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tandem", description="Local chat sped up by speculative decoding.")
    parser.add_argument("--version", action="version", version=f"tandem {__version__}")
    sub = parser.add_subparsers(dest="command")

    p_models = sub.add_parser("models", help="fetch and list model files")
    msub = p_models.add_subparsers(dest="models_command", required=True)
    p_fetch = msub.add_parser("fetch", help="fetch model files or sets (demo, test, incompatible, or a model key)")
    p_fetch.add_argument("names", nargs="+", metavar="NAME")
    p_fetch.add_argument("--json", action="store_true", help="print one JSON document")
    p_fetch.set_defaults(func=cmd_models)
    p_list = msub.add_parser("list", help="what is cached, where, its size, and whether it is verified")
    p_list.add_argument("--json", action="store_true", help="print one JSON document")
    p_list.add_argument("--verify", action="store_true", help="re-hash every file instead of trusting the record")
    p_list.set_defaults(func=cmd_models)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_OK
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
