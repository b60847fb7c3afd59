"""The engine process: owns the models, their KV caches and the decoding loop; serves one request at
a time from the window's worker (see `protocol`).

Two threads: the reader takes every message off the request pipe as it arrives, acts on controls
(cancel, new speculation settings) at once, and queues requests; the main thread serves the queue.
When the parent goes away (its end of the pipe closes), the reader queues a shutdown and the
process ends by itself.
"""
from __future__ import annotations

import faulthandler
import queue
import signal
import sys
import threading
import time
from multiprocessing.connection import Connection

from desktop_app.engine.events import FinishEvent, RoundEvent
from desktop_app.engine.process import protocol as P
from desktop_app.engine.settings import Controls


BATCH_WINDOW_S = 0.02              # rounds completed within 20 ms of the last message go out together


class Host:
    def __init__(self, replies: Connection):
        self.replies = replies
        self.pair = None
        self.queue: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._controls: dict[int, Controls] = {}          # running or queued generations
        self._transfers: dict[int, P.Transfer] = {}        # ... and what their streaming cost
        self._load_cancels: dict[int, threading.Event] = {}
        self._cancelled: set[int] = set()                  # cancels that came before their request
        self.failed = False                                # the reader met a message it could not read

    # -- reader thread
    def read(self, requests: Connection) -> None:
        while True:
            try:
                message = requests.recv()
            except (EOFError, OSError):                    # the window is gone: end
                self.queue.put(P.Shutdown())
                return
            except Exception as exc:                       # a message that does not unpickle: a bug
                print(f"engine error: unreadable request ({type(exc).__name__}: {exc})", file=sys.stderr)
                self.failed = True
                self.queue.put(P.Shutdown())
                return
            with self._lock:
                if isinstance(message, P.Cancel):
                    self._cancel(message.id)
                    continue
                if isinstance(message, P.SetSpec):
                    controls = self._controls.get(message.id)
                    if controls is not None:
                        controls.set(message.spec)
                        self._log_control(message.id, "spec")
                    continue
                if isinstance(message, P.Generate):
                    controls = self._controls[message.id] = Controls(message.spec)
                    self._transfers[message.id] = P.Transfer()
                    if message.id in self._cancelled:
                        controls.cancel()
                        self._log_control(message.id, "cancel")
                elif isinstance(message, P.Load):
                    event = self._load_cancels[message.id] = threading.Event()
                    if message.id in self._cancelled:
                        event.set()
            self.queue.put(message)

    def _cancel(self, request_id: int) -> None:
        targets = [request_id] if request_id else list(self._controls) + list(self._load_cancels)
        for rid in targets:
            if rid in self._controls:
                self._controls[rid].cancel()
                self._log_control(rid, "cancel")
            elif rid in self._load_cancels:
                self._load_cancels[rid].set()
            else:
                self._cancelled.add(rid)

    def _log_control(self, request_id: int, kind: str) -> None:
        transfer = self._transfers[request_id]
        transfer.controls.append((kind, transfer.rounds))

    # -- main thread
    def serve(self) -> None:
        while True:
            message = self.queue.get()
            if isinstance(message, P.Shutdown):
                break
            try:
                value = self.handle(message)
            except Exception as exc:   # every failure is an answer; the process stays up
                self.send(_failure(message.id, exc))
            else:
                self.send(P.Done(message.id, value))
            finally:
                with self._lock:
                    self._controls.pop(message.id, None)
                    self._transfers.pop(message.id, None)
                    self._load_cancels.pop(message.id, None)
                    self._cancelled.discard(message.id)
        if self.pair is not None:
            self.pair.close()

    def send(self, message) -> None:
        self.replies.send(message)

    def handle(self, message):
        if isinstance(message, P.Load):
            return self.load(message)
        if self.pair is None:
            raise RuntimeError("no model is loaded")
        if isinstance(message, P.Generate):
            return self.generate(message)
        if isinstance(message, P.Tokenize):
            model = self.pair.target
            return [model.tokenize(text, add_special=message.add_special, parse_special=special)
                    for text, special in message.parts]
        if isinstance(message, P.Pieces):
            return [self.pair.target.special_piece(t) for t in message.tokens]
        if isinstance(message, P.TopLogits):
            return self.pair.top_logits(list(message.tokens), message.k)
        raise ValueError(f"unknown request {type(message).__name__}")

    def load(self, message: P.Load) -> P.PairInfo:
        from desktop_app.engine.pair import ModelPair

        cancel = self._load_cancels[message.id]
        last = ["", -1.0]

        def progress(what: str, fraction: float) -> None:       # llama.cpp reports hundreds of steps
            if what != last[0] or fraction - last[1] >= 0.01 or fraction >= 1.0:
                last[:] = [what, fraction]
                self.send(P.Progress(what, fraction))

        pair = ModelPair.load(message.target, message.draft, message.target_options, message.draft_options,
                              progress=progress, cancel=cancel.is_set)
        old, self.pair = self.pair, pair
        if old is not None:
            old.close()
        repack = getattr(pair, "repack", None)
        return P.PairInfo(_model_info(pair.target), _model_info(pair.draft) if pair.draft else None,
                          pair.n_ctx, getattr(repack, "notice", "") or "", pair.plain_step_s)

    def generate(self, message: P.Generate) -> P.Transfer:
        """Stream the engine's events in whole rounds (a round, its tokens, the finish if it ended the
        reply). A round is sent as soon as it is complete, unless the last message left less than
        BATCH_WINDOW_S ago: then it waits for the next round, so fast small rounds share a pipe write
        (a window repaints at about that rate anyway) and a token is never held back longer than one
        round. Returns what the streaming cost this process."""
        controls = self._controls[message.id]
        transfer = self._transfers[message.id]
        batch: list = []
        expected = 0                       # tokens of the current round not yet in the batch
        last_sent = time.perf_counter()
        try:
            for event in self.pair.generate(list(message.prompt), message.sampling, controls, message.max_tokens,
                                            message.stop, message.primed):
                batch.append(event)
                if isinstance(event, RoundEvent):
                    transfer.rounds += 1
                    expected = len(event.emitted)
                    continue
                finished = isinstance(event, FinishEvent)
                expected = 0 if finished else expected - 1
                if expected <= 0 and (finished or time.perf_counter() - last_sent >= BATCH_WINDOW_S):
                    self._send_events(batch, transfer)
                    batch = []
                    last_sent = time.perf_counter()
        finally:                           # (an error mid-reply still delivers what was computed)
            if batch:
                self._send_events(batch, transfer)
        return transfer

    def _send_events(self, batch: list, transfer: P.Transfer) -> None:
        t0 = time.perf_counter()
        self.send(P.Events(tuple(batch)))
        transfer.messages += 1
        transfer.send_s += time.perf_counter() - t0


def _model_info(model) -> P.ModelInfo:
    specials = {t: model.special_piece(t) for t in (model.bos, model.eos) if t >= 0}
    return P.ModelInfo(model.path, model.n_vocab, model.bos, model.eos, model.add_bos, model.add_eos,
                       model.vocab_type, model.chat_template(), specials, model.vocab_id)


def _failure(request_id: int, exc: Exception) -> P.Failed:
    return P.Failed(request_id, type(exc).__name__, str(exc), getattr(exc, "path", "") or "",
                    getattr(exc, "reason", "") or "")


def main(argv: list[str]) -> int:
    """The engine process's entry point: `--requests FD --replies FD`, the two pipe ends the parent
    passed. Its stdout and stderr are a log file the parent reads if this process dies."""
    import argparse

    parser = argparse.ArgumentParser(prog="tandem --engine-host")
    parser.add_argument("--requests", type=int, required=True)
    parser.add_argument("--replies", type=int, required=True)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl+C is for the window; this ends when it does
    faulthandler.enable()                          # a native fault leaves its Python stack in the log
    requests = Connection(args.requests, writable=False)
    host = Host(Connection(args.replies, readable=False))
    threading.Thread(target=host.read, args=(requests,), name="requests", daemon=True).start()
    host.serve()
    return 1 if host.failed else 0
