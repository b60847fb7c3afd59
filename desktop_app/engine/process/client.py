"""The parent's side of the engine process: start it, ask it for things, notice when it dies.

`EngineProcess.load()` returns a `RemotePair`, which offers what a chat session uses of a
`ModelPair` (`target`, `draft`, `n_ctx`, `generate`, `close`), so the session runs unchanged on
either. Requests are made from one thread at a time (the window's worker); `cancel()`, `kill()` and
the speculation settings of a running reply may be changed from any thread.

When the child dies, the request in flight raises `EngineCrashed`, whose message says what happened
(the signal, what the engine was doing, its last native message) and what to try; `on_death` is
called once per child from a watcher thread, for deaths while idle too. Each child is its own
`_Child`: a death is always described from the process that died, never from a newer one.
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
STAGES = {"probe": "checking this CPU", "target": "loading the target model", "draft": "loading the draft model",
          "measuring": "measuring the models' speed", "ready": "finishing loading"}


class EngineError(RuntimeError):
    """A request failed inside the engine for a reason it understood (`kind` names the error)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class _Child:
    """One engine process: its pipes, its native log, and how it died."""

    def __init__(self):
        req_read, req_write = os.pipe()
        rep_read, rep_write = os.pipe()
        fd, self.log_path = tempfile.mkstemp(prefix="tandem-engine-", suffix=".log")
        try:
            # A session of its own: Ctrl+C in the window's terminal is the window's business; the child
            # ends by itself when the window's end of its request pipe closes.
            self.process = subprocess.Popen(
                tandem_command(HOST_ARG, "--requests", str(req_read), "--replies", str(rep_write)),
                pass_fds=(req_read, rep_write), stdin=subprocess.DEVNULL, stdout=fd, stderr=fd,
                env=child_environment(), start_new_session=True)
        except BaseException:
            for own in (req_write, rep_read):
                os.close(own)
            os.unlink(self.log_path)
            raise
        finally:
            for own in (fd, req_read, rep_write):   # the child holds these now; closing ours lets a
                os.close(own)                       # dead child's pipe read as end-of-file
        self.requests = Connection(req_write, readable=False)
        self.replies = Connection(rep_read, writable=False)
        self.send_lock = threading.Lock()
        self.death_lock = threading.Lock()
        self.death: EngineCrashed | None = None
        self.stopping = False
        self.closed = False

    @property
    def running(self) -> bool:
        return self.process.poll() is None and self.death is None

    def send(self, message, stage: str) -> None:
        with self.send_lock:
            if self.closed:
                raise EngineCrashed("The model engine is not running.")
            try:
                self.requests.send(message)
            except OSError:                          # a broken pipe: the child is gone
                raise self.crash(stage) from None

    def receive(self, stage: str):
        try:
            return self.replies.recv()
        except (EOFError, OSError):
            raise self.crash(stage) from None

    def crash(self, stage: str) -> EngineCrashed:
        """This child's death, described once (the watcher and a reader may both ask)."""
        with self.death_lock:
            if self.death is None:
                try:
                    self.process.wait(5)
                except subprocess.TimeoutExpired:    # its pipe broke, yet it runs: it is of no use now
                    self.process.kill()
                    self.process.wait()
                code = self.process.returncode
                self.death = EngineCrashed(P.describe_death(code, stage, self.log_tail()), code, stage)
            return self.death

    def log_tail(self) -> str:
        """The last error line the child wrote natively (llama.cpp's GGML_ASSERT and the like)."""
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(max(0, os.path.getsize(self.log_path) - LOG_TAIL_BYTES))
                lines = fh.read().decode("utf-8", "replace").splitlines()
        except OSError:
            return ""
        said = [ln.strip() for ln in lines if NATIVE_ERROR.search(ln) and not ln.startswith("Fatal Python error")]
        return said[-1][:300] if said else ""

    def close(self) -> None:
        with self.send_lock:
            self.closed = True
            self.requests.close()
        self.replies.close()
        if os.path.exists(self.log_path):
            os.unlink(self.log_path)


class EngineProcess:
    def __init__(self, on_death: Callable[[EngineCrashed], None] | None = None):
        self.on_death = on_death
        self._ids = itertools.count(1)
        self._request_lock = threading.Lock()
        self._requester: int | None = None          # the thread in a request, to refuse a nested one
        self._child: _Child | None = None
        self.stage = "idle"                         # what the engine is doing, for a death report

    # -- lifetime
    @property
    def pid(self) -> int | None:
        return self._child.process.pid if self._child is not None else None

    @property
    def alive(self) -> bool:
        return self._child is not None and self._child.running

    def ensure_started(self) -> None:
        """Start a child unless one runs: a fresh interpreter (no fork of a process with Qt threads)
        talking over two pipes, its native output (llama.cpp's, a fault's traceback) in a log file."""
        if self.alive:
            return
        if self._child is not None:
            self._child.close()
        child = self._child = _Child()
        self.stage = "idle"
        threading.Thread(target=self._watch, args=(child,), name="engine-watch", daemon=True).start()

    def shutdown(self) -> None:
        """Stop what runs, ask the child to free its models and exit; kill it if it has not within a
        few seconds."""
        child, self._child = self._child, None
        if child is None:
            return
        child.stopping = True
        for message in (P.Cancel(0), P.Shutdown()):
            try:
                child.send(message, self.stage)
            except EngineCrashed:
                break
        try:
            child.process.wait(SHUTDOWN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            child.process.kill()
            child.process.wait()
        child.close()

    def kill(self) -> None:
        """Kill the child at once, as the system would (a stuck engine; tests)."""
        child = self._child
        if child is not None and child.process.poll() is None:
            child.process.kill()

    def _watch(self, child: _Child) -> None:
        child.process.wait()
        if not child.stopping:
            death = child.crash(self.stage if child is self._child else "idle")
            if self.on_death is not None:
                self.on_death(death)

    # -- talking
    def _current(self) -> _Child:
        child = self._child
        if child is None:
            raise EngineCrashed("The model engine is not running.")
        return child

    def send_control(self, message) -> None:
        """A control message (cancel, new settings): from any thread; nothing to do if the engine is gone."""
        try:
            self._current().send(message, self.stage)
        except EngineCrashed:
            pass

    def cancel(self, request_id: int = 0) -> None:
        """Cancel a request (0: whatever runs)."""
        self.send_control(P.Cancel(request_id))

    def next_id(self) -> int:
        return next(self._ids)

    def _enter(self) -> None:
        if self._requester == threading.get_ident():
            raise RuntimeError("a request to the engine was made while another one is being read")
        self._request_lock.acquire()
        self._requester = threading.get_ident()

    def _leave(self) -> None:
        self._requester = None
        self._request_lock.release()

    def _answers(self, child: _Child, request_id: int) -> Iterator:
        """The replies to one request, up to and including its Done or Failed."""
        while True:
            reply = child.receive(self.stage)
            if getattr(reply, "id", request_id) != request_id:
                raise EngineError("ProtocolError", f"the engine answered request {reply.id} during {request_id}")
            yield reply
            if isinstance(reply, (P.Done, P.Failed)):
                return

    def request(self, message, on_message: Callable[[object], None] | None = None,
                cancelled: Callable[[], bool] | None = None):
        """Send a request and wait for its answer, passing Progress/Events to `on_message`. `cancelled`:
        whether it was cancelled before it was sent (a cancel that came while no engine ran, or before
        the engine knew of the request, reaches no one: this one is cancelled once it is sent)."""
        self._enter()
        try:
            child = self._current()
            child.send(message, self.stage)
            if cancelled is not None and cancelled():
                child.send(P.Cancel(message.id), self.stage)
            for reply in self._answers(child, message.id):
                if isinstance(reply, P.Done):
                    return reply.value
                if isinstance(reply, P.Failed):
                    raise _error(reply)
                if on_message is not None:
                    on_message(reply)
        finally:
            self._leave()

    # -- what the worker asks
    def load(self, target: str, draft: str | None, target_options, draft_options,
             progress: Callable[[str, float], None] | None = None,
             cancelled: Callable[[], bool] | None = None) -> "RemotePair":
        """Load a pair (LoadCancelled: cancelled, by cancel() or, before it was sent, by `cancelled`)."""
        self.ensure_started()

        def on_message(reply):
            if isinstance(reply, P.Progress):
                self.stage = f"{STAGES.get(reply.what, reply.what)} ({100 * reply.fraction:.0f} %)"
                if progress is not None:
                    progress(reply.what, reply.fraction)

        self.stage = "loading the models"
        try:
            info = self.request(P.Load(self.next_id(), target, draft, target_options, draft_options), on_message,
                                cancelled)
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
        self.vocab_id = info.vocab_id

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


class RemotePair:
    """A loaded pair in the engine process, used like a `ModelPair`."""

    def __init__(self, engine: EngineProcess, info: P.PairInfo):
        self.engine = engine
        self.info = info
        self.target = RemoteModel(engine, info.target)
        self.draft = RemoteModel(engine, info.draft) if info.draft else None
        self.n_ctx = info.n_ctx
        self.notice = info.notice
        self.plain_step_s = info.plain_step_s
        self.last_transfer: P.Transfer | None = None      # what streaming the last reply cost the engine

    def generate(self, prompt: Sequence[int], sampling: SamplingParams, controls: Controls | None = None,
                 max_tokens: int = 256, stop: Sequence[str] = (), primed: int = 0) -> Iterator:
        """The engine's events, as `ModelPair.generate` yields them. Cancelling `controls`, or changing
        its settings, reaches the engine at once; closing the iterator early cancels the reply."""
        engine = self.engine
        controls = controls or Controls()
        rid = engine.next_id()

        def forward(c: Controls) -> None:
            engine.send_control(P.Cancel(rid) if c.cancelled else P.SetSpec(rid, c.settings))

        engine._enter()
        unsubscribe = controls.subscribe(forward)
        sent = answered = False
        try:
            child = engine._current()
            engine.stage = "reading the prompt"
            child.send(P.Generate(rid, tuple(prompt), sampling, controls.settings, max_tokens, tuple(stop), primed),
                       engine.stage)
            sent = True
            if controls.cancelled:
                engine.cancel(rid)
            rounds = 0
            for reply in engine._answers(child, rid):
                if isinstance(reply, P.Events):
                    for event in reply.events:
                        if isinstance(event, RoundEvent):
                            rounds += 1
                            engine.stage = f"generating a reply (after round {rounds})"
                        yield event
                elif isinstance(reply, P.Done):
                    answered = True
                    self.last_transfer = reply.value
                elif isinstance(reply, P.Failed):
                    answered = True
                    raise _error(reply)
        finally:
            unsubscribe()
            if sent and not answered and child.running:     # the consumer stopped early: stop the engine
                try:                                        # too, and read to the end of the reply so the
                    child.send(P.Cancel(rid), engine.stage)  # next request starts clean
                    for _ in engine._answers(child, rid):
                        pass
                except EngineCrashed:
                    pass
            engine.stage = "idle"
            engine._leave()

    def top_logits(self, tokens: Sequence[int], k: int = 2) -> list[tuple[int, float]]:
        """The target's k best next tokens after `tokens`, as (token, logit), highest first (see
        `ModelPair.top_logits`)."""
        engine = self.engine
        return [(int(t), float(v)) for t, v in engine.request(P.TopLogits(engine.next_id(), tuple(tokens), k))]

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
