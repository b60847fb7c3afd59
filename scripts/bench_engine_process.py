#!/usr/bin/env python3
"""What the engine's own process costs: tokens per second as the window receives them, against the
same chat session running the engine in this process, interleaved in one run.

    python scripts/bench_engine_process.py [--repeat 8] [-n 256]

Both sides run the same `ChatSession` turn (template, history writes) on the same pair, greedy:
  in-process   ChatSession(ModelPair) consumed in a plain thread, as the CLI runs the engine
  window       the window's EngineWorker on its QThread, the models in the engine process, each
               token timed when its signal reaches the UI thread (an offscreen QApplication)
Tokens per second is (tokens - 1) / (last token - first token) at the receiving end, so it covers
the pipe, the Qt signals and the UI thread's event loop, and leaves out the prompt. Each repeat
runs both back to back, in alternating order, and the ratio window ÷ in-process is taken per repeat;
the median and min-max of those ratios are printed, per setting (plain decoding and the draft model).
Defaults: the SmolLM2-135M test pair (the fastest tokens here, so the worst case for overhead).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QEventLoop, QObject, QThread, QTimer, Signal, Slot  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from desktop_app import models  # noqa: E402
from desktop_app.chat.history import HistoryStore  # noqa: E402
from desktop_app.chat.session import ChatSession, GenerationOptions  # noqa: E402
from desktop_app.engine import GREEDY, LoadOptions, ModelPair, SpecSettings, TokenEvent  # noqa: E402
from desktop_app.ui.worker import EngineWorker, GenerateRequest, LoadRequest  # noqa: E402

PROMPT = "Write a long story about a dragon who learns to code. Make it at least five paragraphs."
SETTINGS = {"plain": SpecSettings(enabled=False, drafter="none"),
            "draft model γ=4": SpecSettings(drafter="model", draft_max=4)}


def rate(times: list[float]) -> float:
    return (len(times) - 1) / (times[-1] - times[0]) if len(times) > 1 and times[-1] > times[0] else 0.0


class Receiver(QObject):
    """Lives on the UI thread: times every token signal the worker sends, as the window would get it."""

    requestLoad = Signal(object)
    requestGenerate = Signal(object)

    def __init__(self, worker: EngineWorker):
        super().__init__()
        self.times: list[float] = []
        self.n_tokens = 0
        self.loop = QEventLoop()
        self.failed = ""
        worker.token.connect(self.on_token)
        worker.finished.connect(self.on_finished)
        worker.loaded.connect(lambda _info: self.loop.quit())
        worker.loadFailed.connect(self.on_failed)
        worker.generationFailed.connect(lambda _cid, message: self.on_failed(message))
        worker.engineDied.connect(lambda _cid, message: self.on_failed(message))
        self.requestLoad.connect(worker.load)
        self.requestGenerate.connect(worker.generate)

    @Slot(object)
    def on_token(self, _event) -> None:
        self.times.append(time.perf_counter())

    @Slot(int, object)
    def on_finished(self, _cid, event) -> None:
        self.n_tokens = event.stats.n_tokens
        self.loop.quit()

    @Slot(str)
    def on_failed(self, message: str) -> None:
        self.failed = message
        self.loop.quit()

    def wait(self) -> None:
        self.loop.exec()
        if self.failed:
            raise SystemExit(f"failed: {self.failed}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-m", "--model", default="smollm2-135m", help="target GGUF or catalogue key")
    parser.add_argument("-md", "--model-draft", default=None, help="draft GGUF (default: the test model's Q2_K)")
    parser.add_argument("-n", "--n-tokens", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=8)
    parser.add_argument("-t", "--threads", type=int, default=None)
    args = parser.parse_args()
    target = models.path_for(args.model)
    draft = args.model_draft
    if draft is None:
        from desktop_app.models.requantize import requantize
        draft = str(requantize(target, os.path.join(os.path.dirname(target), "SmolLM2-135M-Instruct.Q2_K.gguf")))
    threads = args.threads or max(1, os.cpu_count() or 1)
    options = LoadOptions(n_ctx=2048, n_threads=threads)
    folder = tempfile.mkdtemp(prefix="tandem-bench-")

    app = QApplication.instance() or QApplication(sys.argv[:1])
    thread = QThread()
    worker = EngineWorker(os.path.join(folder, "window.db"))
    worker.moveToThread(thread)
    thread.start()
    receiver = Receiver(worker)
    receiver.requestLoad.emit(LoadRequest(target, draft, options, options))
    receiver.wait()
    window_store = HistoryStore(os.path.join(folder, "window.db"))

    local_store = HistoryStore(os.path.join(folder, "local.db"))
    local = ChatSession(ModelPair.load(target, draft, options, options), local_store)

    def run_local(spec) -> tuple[float, int]:
        cid = local_store.create_conversation("bench")
        times: list[float] = []
        done = threading.Event()

        def consume():
            for event in local.send(cid, PROMPT, GenerationOptions(GREEDY, spec, args.n_tokens)):
                if isinstance(event, TokenEvent):
                    times.append(time.perf_counter())
            done.set()

        threading.Thread(target=consume).start()
        done.wait()
        return rate(times), len(times)

    def run_window(spec) -> tuple[float, int]:
        cid = window_store.create_conversation("bench")
        receiver.times = []
        receiver.requestGenerate.emit(GenerateRequest("send", cid, PROMPT, GenerationOptions(GREEDY, spec, args.n_tokens)))
        receiver.wait()
        return rate(receiver.times), len(receiver.times)

    print(f"target {os.path.basename(target)}, draft {os.path.basename(draft)}, {args.n_tokens} tokens, "
          f"{args.repeat} repeats, {threads} threads")
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in SETTINGS}
    for repeat in range(args.repeat + 1):                 # repeat 0 warms both up and is not counted
        for name, spec in SETTINGS.items():
            order = [("window", run_window), ("in-process", run_local)]
            if repeat % 2:
                order.reverse()
            got = {}
            for side, fn in order:
                time.sleep(0.3)                           # let the other side's threads go idle
                got[side] = fn(spec)
            (w, nw), (l, nl) = got["window"], got["in-process"]
            if nw != nl:
                print(f"  note: {nw} tokens through the window, {nl} in-process")
            if repeat:
                results[name].append((w, l))
                print(f"  {name:16s} repeat {repeat}: window {w:7.1f} tok/s, in-process {l:7.1f} tok/s, "
                      f"ratio {w / l:.3f}")
    print()
    for name, pairs in results.items():
        ratios = [w / l for w, l in pairs]
        print(f"{name:16s} window ÷ in-process: median {statistics.median(ratios):.3f} "
              f"({min(ratios):.3f}–{max(ratios):.3f}); window {statistics.median(w for w, _ in pairs):.1f} tok/s, "
              f"in-process {statistics.median(l for _, l in pairs):.1f} tok/s")
    worker.shutdown()
    thread.quit()
    thread.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
