"""The parent's side of the engine process: start it, ask it for things, notice when it dies.

`EngineProcess.load()` returns a `RemotePair`, which offers what a chat session uses of a
`ModelPair` (`target`, `draft`, `n_ctx`, `generate`, `close`), so the session runs unchanged on
either. Requests are made from one thread at a time (the window's worker); `cancel()` and the
speculation settings of a running reply may be changed from any thread.

When the child dies, the request in flight raises `EngineCrashed`, whose message says what happened
(the signal, what the engine was doing, its last native message) and what to try; `on_death` is
called once from a watcher thread, for deaths while idle too.
"""
from __future__ import annotations

import itertools
import os
import re
import subprocess
import tempfile
import threading
from multiprocessing.connection import Connection
from typing import Callable, Iterator, Sequence

from desktop_app.child import child_environment, tandem_command
from desktop_app.engine.errors import IncompatiblePair, LoadCancelled, ModelLoadError
from desktop_app.engine.events import RoundEvent
from desktop_app.engine.process import protocol as P
from desktop_app.engine.process.protocol import EngineCrashed
from desktop_app.engine.sampling import SamplingParams
from desktop_app.engine.settings import Controls

SHUTDOWN_TIMEOUT_S = 5.0
LOG_TAIL_BYTES = 16384
NATIVE_ERROR = re.compile(r"GGML_ASSERT|GGML_ABORT|error|failed|out of memory", re.IGNORECASE)
HOST_ARG = "--engine-host"             # cli.main hands these command lines to host.main


class EngineError(RuntimeError):
    """A request failed inside the engine for a reason it understood (`kind` names the error)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class EngineProcess:
    def __init__(self, on_death: Callable[[EngineCrashed], None] | None = None):
        self.on_death = on_death
        self._ids = itertools.count(1)
        self._send_lock = threading.Lock()
        self._request_lock = threading.Lock()
        self._death_lock = threading.Lock()
        self._process = None
        self._requests = self._replies = None
        self._log_path: str | None = None
        self._stopping = False
        self._death: EngineCrashed | None = None
        self.stage = "starting"                     # what the engine is doing, for a death report
        self.running_id = 0

    # -- lifetime
    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None and self._death is None

    def start(self) -> None:
        """Start the child: a fresh interpreter (no fork of a process that runs Qt threads), talking over
        two pipes, its native output (llama.cpp's log, a fault's traceback) going to a log file."""
        req_read, req_write = os.pipe()
        rep_read, rep_write = os.pipe()
        fd, self._log_path = tempfile.mkstemp(prefix="tandem-engine-", suffix=".log")
        try:
            self._process = subprocess.Popen(
                tandem_command(HOST_ARG, "--requests", str(req_read), "--replies", str(rep_write)),
                pass_fds=(req_read, rep_write), stdin=subprocess.DEVNULL, stdout=fd, stderr=fd,
                env=child_environment())
        finally:
            for own in (fd, req_read, rep_write):   # the child holds these now; closing ours lets a
                os.close(own)                       # dead child's pipe read as end-of-file
        self._requests = Connection(req_write, readable=False)
        self._replies = Connection(rep_read, writable=False)
        self._stopping = False
        self._death = None
        self.stage = "idle"
        threading.Thread(target=self._watch, args=(self._process,), name="engine-watch", daemon=True).start()

    def ensure_started(self) -> None:
        if not self.alive:
            if self._process is not None:
                self._discard()
            self.start()

    def shutdown(self) -> None:
        """Ask the child to free its models and exit; kill it if it does not within a few seconds."""
        if self._process is None:
            return
        self._stopping = True
        try:
            self._send(P.Shutdown())
        except (OSError, EngineCrashed):
            pass
        try:
            self._process.wait(SHUTDOWN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._discard()

    def kill(self) -> None:
        """Kill the child at once, as the system would (for tests and a stuck engine)."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()

    def _discard(self) -> None:
        for conn in (self._requests, self._replies):
            if conn is not None:
                conn.close()
        self._requests = self._replies = None
        if self._log_path and os.path.exists(self._log_path):
            os.unlink(self._log_path)
        self._process = None

    def _watch(self, process) -> None:
        process.wait()
        if self._process is process and not self._stopping:
            death = self._crash()
            if self.on_death is not None:
                self.on_death(death)

    def _crash(self) -> EngineCrashed:
        """The death of the current child, described once (the watcher and a reader may both ask)."""
        with self._death_lock:
            return self._describe_crash()

    def _describe_crash(self) -> EngineCrashed:
        if self._death is None:
            process = self._process
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:        # its pipe broke, yet it runs: it is of no use now
                process.kill()
                process.wait()
            self._death = EngineCrashed(P.describe_death(process.returncode, self.stage, self._log_tail()),
                                        process.returncode, self.stage)
        return self._death

    def _log_tail(self) -> str:
        """The last error line the child wrote natively (llama.cpp's GGML_ASSERT and the like)."""
        try:
            with open(self._log_path, "rb") as fh:
                fh.seek(max(0, os.path.getsize(self._log_path) - LOG_TAIL_BYTES))
                lines = fh.read().decode("utf-8", "replace").splitlines()
        except (OSError, TypeError):
            return ""
        said = [ln.strip() for ln in lines if NATIVE_ERROR.search(ln) and not ln.startswith("Fatal Python error")]
        return said[-1][:300] if said else ""

    # -- talking
    def _send(self, message) -> None:
        with self._send_lock:
            if self._requests is None:
                raise EngineCrashed("The model engine is not running.")
            try:
                self._requests.send(message)
            except (OSError, ValueError):
                raise self._crash() from None

    def _receive(self):
        try:
            return self._replies.recv()
        except (EOFError, OSError):
            raise self._crash() from None

    def request(self, message, on_message: Callable[[object], None] | None = None):
        """Send a request and wait for its answer, passing Progress/Events to `on_message`."""
        with self._request_lock:
            self.running_id = message.id
            try:
                self._send(message)
                while True:
                    reply = self._receive()
                    if isinstance(reply, P.Done):
                        return reply.value
                    if isinstance(reply, P.Failed):
                        raise _error(reply)
                    if on_message is not None:
                        on_message(reply)
            finally:
                self.running_id = 0

    def cancel(self, request_id: int = 0) -> None:
        """Cancel a request (0: whatever runs). Safe from any thread; a dead engine has nothing to cancel."""
        try:
            self._send(P.Cancel(request_id))
        except EngineCrashed:
            pass

    def next_id(self) -> int:
        return next(self._ids)

    # -- what the worker asks
    def load(self, target: str, draft: str | None, target_options, draft_options,
             progress: Callable[[str, float], None] | None = None) -> "RemotePair":
        self.ensure_started()
        names = {"target": "the target model", "draft": "the draft model", "ready": "measuring the models"}

        def on_message(reply):
            if isinstance(reply, P.Progress):
                self.stage = f"loading {names.get(reply.what, reply.what)} ({100 * reply.fraction:.0f} %)"
                if progress is not None:
                    progress(reply.what, reply.fraction)

        self.stage = "loading the models"
        try:
            info = self.request(P.Load(self.next_id(), target, draft, target_options, draft_options), on_message)
        finally:
            self.stage = "idle"
        return RemotePair(self, info)


class RemoteModel:
    """A model living in the engine process: its vocabulary's facts, and tokenising by request."""

    def __init__(self, engine: EngineProcess, info: P.ModelInfo):
        self._engine = engine
        self.info = info
        self.path = info.path
        self.n_vocab = info.n_vocab
        self.bos, self.eos = info.bos, info.eos
        self.add_bos, self.add_eos = info.add_bos, info.add_eos
        self.vocab_type = info.vocab_type

    def chat_template(self) -> str | None:
        return self.info.chat_template

    def tokenize_many(self, parts: Sequence[tuple[str, bool]], add_special: bool = False) -> list[list[int]]:
        return self._engine.request(P.Tokenize(self._engine.next_id(), tuple(parts), add_special))

    def tokenize(self, text: str, add_special: bool = False, parse_special: bool = False) -> list[int]:
        return self.tokenize_many([(text, parse_special)], add_special)[0]

    def special_piece(self, token: int) -> bytes:
        if token in self.info.special_pieces:
            return self.info.special_pieces[token]
        return self._engine.request(P.Pieces(self._engine.next_id(), (token,)))[0]

    def detokenize(self, tokens: Sequence[int]) -> str:
        pieces = self._engine.request(P.Pieces(self._engine.next_id(), tuple(tokens)))
        return b"".join(pieces).decode("utf-8", errors="replace")


class RemotePair:
    """A loaded pair in the engine process, used like a `ModelPair`."""

    def __init__(self, engine: EngineProcess, info: P.PairInfo):
        self.engine = engine
        self.info = info
        self.target = RemoteModel(engine, info.target)
        self.draft = RemoteModel(engine, info.draft) if info.draft else None
        self.n_ctx = info.n_ctx
        self.notice = info.notice
        self.last_transfer: P.Transfer | None = None      # what streaming the last reply cost the engine

    def generate(self, prompt: Sequence[int], sampling: SamplingParams, controls: Controls | None = None,
                 max_tokens: int = 256, stop: Sequence[str] = ()) -> Iterator:
        """The engine's events, as `ModelPair.generate` yields them. Cancelling `controls`, or changing
        its settings, reaches the engine at once; closing the iterator early cancels the reply."""
        engine = self.engine
        controls = controls or Controls()
        rid = engine.next_id()

        def forward(c: Controls) -> None:
            if c.cancelled:
                engine.cancel(rid)
            else:
                try:
                    engine._send(P.SetSpec(rid, c.settings))
                except EngineCrashed:
                    pass                        # the reply's own read reports the death

        with engine._request_lock:
            engine.running_id = rid
            unsubscribe = controls.subscribe(forward)
            done = False
            try:
                engine.stage = "reading the prompt"
                engine._send(P.Generate(rid, tuple(prompt), sampling, controls.settings, max_tokens, tuple(stop)))
                if controls.cancelled:
                    engine.cancel(rid)
                rounds = 0
                while True:
                    reply = engine._receive()
                    if isinstance(reply, P.Events):
                        for event in reply.events:
                            if isinstance(event, RoundEvent):
                                rounds += 1
                                engine.stage = f"generating a reply (after round {rounds})"
                            yield event
                    elif isinstance(reply, P.Done):
                        done = True
                        self.last_transfer = reply.value
                        return
                    elif isinstance(reply, P.Failed):
                        done = True
                        raise _error(reply)
            finally:
                unsubscribe()
                if not done and engine.alive:              # the consumer stopped early: stop the
                    engine.cancel(rid)                     # engine too, and read to the end of the
                    try:                                   # reply so the next request starts clean
                        while not isinstance(engine._receive(), (P.Done, P.Failed)):
                            pass
                    except EngineCrashed:
                        pass
                engine.stage = "idle"
                engine.running_id = 0

    def close(self) -> None:
        """The models are freed when another pair is loaded or the engine shuts down."""


def _error(failed: P.Failed) -> Exception:
    if failed.kind == "LoadCancelled":
        return LoadCancelled(failed.path)
    if failed.kind == "ModelLoadError":
        return ModelLoadError(failed.path, failed.reason)
    if failed.kind == "IncompatiblePair":
        return IncompatiblePair(failed.message)
    return EngineError(failed.kind, failed.message)
