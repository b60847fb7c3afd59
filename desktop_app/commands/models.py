"""`tandem models fetch|list`."""
from __future__ import annotations

import argparse
import sys
import time

from desktop_app.commands.output import EXIT_FAIL, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, emit_json, fail


class TerminalProgress:
    """A one-line progress bar on stderr (bytes assembled / total); plain lines when not a tty."""

    def __init__(self, stream=sys.stderr, width: int = 30):
        self.stream = stream
        self.width = width
        self.tty = stream.isatty()
        self._last = 0.0
        self._last_line = ""
        self._worked_on: set[str] = set()

    def __call__(self, p) -> None:
        if p.stage == "done" and p.model not in self._worked_on:
            return                      # a verified file already there: nothing to show
        self._worked_on.add(p.model)
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


def _problem(path) -> str:
    """Why a GGUF-named file could not be loaded, from its header ("" where nothing shows)."""
    from desktop_app.models.gguf_info import GGUFError, check_whole

    try:
        check_whole(path)
    except GGUFError as exc:
        return str(exc)
    return ""


def _elsewhere(there: list) -> list:
    """GGUF files where the window looks that are not listed as in Tandem's models folder (`there`: its
    own files), newest first: LM Studio's, the Hugging Face and llama.cpp caches, the folders added in
    the window (`tandem models` listed the models folder only, and a model the window listed was
    nowhere in it: a new user's try). A file there, or a link to one, is not listed again."""
    from desktop_app.chat.settings_file import read_model_folders
    from desktop_app.models.discovery import find_gguf_files

    listed = {_real(p) for p in there}
    return [p for p in find_gguf_files(read_model_folders()) if _real(p) not in listed]


def _real(p):
    try:
        return p.resolve()
    except (OSError, RuntimeError):                 # (RuntimeError: a link loop, before Python 3.13)
        return p


def _sized(paths: list) -> list:
    """(path, size in bytes) of the files still there (one gone since it was listed is left out)."""
    out = []
    for p in paths:
        try:
            out.append((p, p.stat().st_size))
        except OSError:
            pass
    return out


def _file_line(p, size: int, problem: str) -> str:
    return f"  {size / 1e6:8.1f} MB  {p}" + (f"  (cannot be used: {problem})" if problem else "")


def run(args: argparse.Namespace) -> int:
    from desktop_app import models
    from desktop_app.models.discovery import is_gguf_name

    if args.models_command == "list":
        rows = [models.inspect(m, deep=args.verify) for m in models.MODELS.values()]
        folder = models.models_dir()
        known = {m.filename for m in models.MODELS.values()}
        there = [p for p in folder.iterdir() if p.is_file()] if folder.is_dir() else []
        others = sorted(p for p in there if is_gguf_name(p.name) and p.name not in known)
        others, elsewhere = _sized(others), _sized(_elsewhere(there))
        problems = {p: _problem(p) for p, _ in others + elsewhere}   # (a text file or a cut-short copy was
        files = lambda sized: [{"path": str(p), "size": size,                       # noqa: E731  (offered as
                                "problem": problems[p] or None} for p, size in sized]  # a model: a user's try)
        if args.json:
            emit_json({"ok": True, "folder": str(folder), "models": [r.to_json() for r in rows],
                       "other_files": files(others), "elsewhere": files(elsewhere)})
        else:
            print(f"models folder: {folder}")
            for r in rows:
                state = ("verified" if r.verified else "NOT verified") if r.present else "not fetched"
                size = f"{r.size / 1e6:8.1f} MB" if r.present else " " * 11
                print(f"  {r.key:<20} {size}  {state:<13} {r.path if r.present else r.description}")
            if others:
                print("other GGUF files there (not in the catalogue; pass their path to -m or -md):")
                for p, size in others:
                    print(_file_line(p, size, problems[p]))
            if elsewhere:
                print("GGUF files elsewhere, as the window lists them (LM Studio, the Hugging Face and llama.cpp "
                      "caches, folders added in the window; pass their path to -m or -md):")
                for p, size in elsewhere:
                    print(_file_line(p, size, problems[p]))
        return EXIT_OK

    # fetch
    try:
        wanted = models.resolve(args.names)
    except KeyError as exc:
        return fail(args, exc.args[0], EXIT_USAGE)
    progress = None if args.json else TerminalProgress()
    fetched = []
    try:
        for model in wanted:
            models.fetch(model, progress=progress)
            row = models.inspect(model)
            row.verified = True         # fetch returns only a verified file, recorded or not (a read-only folder)
            fetched.append(row)
    except models.FetchError as exc:
        return fail(args, str(exc), EXIT_FAIL)
    except KeyboardInterrupt:
        return fail(args, "fetch interrupted; nothing was left under a final file name", EXIT_INTERRUPTED)
    if args.json:
        emit_json({"ok": True, "models": [r.to_json() for r in fetched]})
    else:
        for r in fetched:
            print(f"{r.key}: {r.path} (verified)")
    return EXIT_OK
