#!/usr/bin/env python3
"""What the engine's own process costs: tokens per second as the window receives them, against the
same chat session running the engine in the consumer's own process, interleaved in one run.

    python scripts/bench_engine_process.py [--repeat 8] [-n 256]

All three sides run the same `ChatSession` turn (template, history writes) on the same pair, greedy:
  window       the window's EngineWorker on its QThread, the models in the engine process, each
               token timed when its signal reaches the UI thread (an offscreen QApplication)
  in-process   ChatSession(ModelPair) in a process of its own without Qt, as `tandem generate` runs
               the engine: the reference
  in-window    ChatSession(ModelPair) on a thread of this Qt process, loaded and run there, as the
               window's worker ran the engine before it had a process of its own
Tokens per second is (tokens - 1) / (last token - first token) at the receiving end, so it covers
the pipe, the Qt signals and the UI thread's event loop, and leaves out the prompt. Since that ratio
moves by ±10 % between neighbouring runs on a shared machine, the window's cost is also bounded
directly: the CPU time its process used for the reply plus the time the engine spent writing to the
pipe, over the decoding time (on two cores every CPU-second of the window can delay decoding by at
most that much). Each repeat runs
the three back to back, in rotating order, and the ratios to in-process are taken per repeat; the
median and min-max of those ratios are printed, per setting (plain decoding and the draft model).
Defaults: the SmolLM2-135M test pair (the fastest tokens here, so the worst case for overhead).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import QEventLoop, QObject, QThread, Signal, Slot  # noqa: E402
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


def turn(session: ChatSession, store: HistoryStore, spec: SpecSettings, n_tokens: int) -> tuple[float, int]:
    """One chat turn through `session`, on the calling thread, timed as its tokens arrive."""
    cid = store.create_conversation("bench")
    times = [time.perf_counter() for event in session.send(cid, PROMPT, GenerationOptions(GREEDY, spec, n_tokens))
             if isinstance(event, TokenEvent)]
    return rate(times), len(times)


class EngineThread:
    """The engine as the window ran it before it had a process of its own: loaded and run on one
    thread of the Qt process (llama.cpp's OpenMP threads belong to the thread that first calls it:
    a pair loaded on one thread and run on another here decodes about a third slower)."""

    def __init__(self, target: str, draft: str, options: LoadOptions, store: HistoryStore):
        import queue

        self.jobs: queue.Queue = queue.Queue()
        self.results: queue.Queue = queue.Queue()
        self.store = store
        threading.Thread(target=self._run, args=(target, draft, options), daemon=True).start()
        self.results.get()

    def _run(self, target, draft, options) -> None:
        session = ChatSession(ModelPair.load(target, draft, options, options), self.store)
        self.results.put("ready")
        while True:
            spec, n_tokens = self.jobs.get()
            self.results.put(turn(session, self.store, spec, n_tokens))

    def __call__(self, spec: SpecSettings, n_tokens: int) -> tuple[float, int]:
        self.jobs.put((spec, n_tokens))
        return self.results.get()


def serve(target: str, draft: str, options: LoadOptions, folder: str) -> int:
    """The in-process reference, in a process without Qt: one turn per setting name read on stdin."""
    store = HistoryStore(os.path.join(folder, "in-process.db"))
    session = ChatSession(ModelPair.load(target, draft, options, options), store)
    print("ready", flush=True)
    for line in sys.stdin:
        name, n_tokens = json.loads(line)
        print(json.dumps(turn(session, store, SETTINGS[name], n_tokens)), flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-m", "--model", default="smollm2-135m", help="target GGUF or catalogue key")
    parser.add_argument("-md", "--model-draft", default=None, help="draft GGUF (default: the test model's Q2_K)")
    parser.add_argument("-n", "--n-tokens", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=8)
    parser.add_argument("-t", "--threads", type=int, default=None)
    parser.add_argument("--settings", default=",".join(SETTINGS), metavar="LIST",
                        help=f"which of: {', '.join(SETTINGS)} (default all)")
    parser.add_argument("--no-in-window", action="store_true", help="leave out the in-window side")
    parser.add_argument("--serve", metavar="FOLDER", help=argparse.SUPPRESS)    # the in-process side
    args = parser.parse_args()
    target = models.path_for(args.model)
    draft = args.model_draft
    if draft is None:
        from desktop_app.models.requantize import requantize
        draft = str(requantize(target, os.path.join(os.path.dirname(target), "SmolLM2-135M-Instruct.Q2_K.gguf")))
    threads = args.threads or max(1, os.cpu_count() or 1)
    options = LoadOptions(n_ctx=2048, n_threads=threads)
    if args.serve:
        return serve(target, draft, options, args.serve)
    folder = tempfile.mkdtemp(prefix="tandem-bench-")
    reference = subprocess.Popen([sys.executable, os.path.abspath(__file__), "-m", target, "-md", draft,
                                  "-t", str(threads), "--serve", folder], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
    assert reference.stdout.readline().strip() == "ready"

    app = QApplication.instance() or QApplication(sys.argv[:1])   # noqa: F841 (Qt needs it alive)
    thread = QThread()
    worker = EngineWorker(os.path.join(folder, "window.db"))
    worker.moveToThread(thread)
    thread.start()
    receiver = Receiver(worker)
    receiver.requestLoad.emit(LoadRequest(target, draft, options, options))
    receiver.wait()
    window_store = HistoryStore(os.path.join(folder, "window.db"))

    in_window = None if args.no_in_window else EngineThread(target, draft, options,
                                                            HistoryStore(os.path.join(folder, "in-window.db")))

    def run_in_window(spec) -> tuple[float, int]:
        return in_window(spec, args.n_tokens)

    def run_in_process(spec) -> tuple[float, int]:
        name = next(k for k, v in SETTINGS.items() if v == spec)
        reference.stdin.write(json.dumps([name, args.n_tokens]) + "\n")
        reference.stdin.flush()
        return tuple(json.loads(reference.stdout.readline()))

    costs: dict[str, list[float]] = {name: [] for name in SETTINGS}

    def run_window(spec) -> tuple[float, int]:
        cid = window_store.create_conversation("bench")
        receiver.times = []
        worker.pair.last_transfer = None
        cpu = time.process_time()
        receiver.requestGenerate.emit(GenerateRequest("send", cid, PROMPT, GenerationOptions(GREEDY, spec, args.n_tokens)))
        receiver.wait()
        while worker.pair.last_transfer is None:          # the engine's answer follows the reply's end
            time.sleep(0.001)
        cpu = time.process_time() - cpu
        # The most the window's side can take from decoding: all the CPU this process used for the
        # reply (the worker's reading and history writes, the UI thread's signals), plus the time the
        # engine process spent pickling and writing its messages, over the decoding time.
        decode_s = receiver.times[-1] - receiver.times[0]
        transfer = worker.pair.last_transfer
        name = next(k for k, v in SETTINGS.items() if v == spec)
        costs.setdefault(name, []).append((cpu + transfer.send_s) / decode_s)
        return rate(receiver.times), len(receiver.times)

    print(f"target {os.path.basename(target)}, draft {os.path.basename(draft)}, {args.n_tokens} tokens, "
          f"{args.repeat} repeats, {threads} threads")
    sides = {"window": run_window, "in-process": run_in_process, "in-window": run_in_window}
    if args.no_in_window:
        del sides["in-window"]
    chosen = {name: SETTINGS[name] for name in args.settings.split(",")}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in chosen}
    for repeat in range(args.repeat + 1):                 # repeat 0 warms all up and is not counted
        for name, spec in chosen.items():
            order = list(sides)
            order = order[repeat % len(order):] + order[:repeat % len(order)]
            got = {}
            for side in order:
                time.sleep(0.3)                           # let the other sides' threads go idle
                got[side] = sides[side](spec)
            counts = {side: n for side, (_, n) in got.items()}
            if len(set(counts.values())) > 1:
                print(f"  note: token counts differ: {counts}")
            if repeat:
                rates = {side: r for side, (r, _) in got.items()}
                results[name].append(rates)
                print(f"  {name:16s} repeat {repeat}: " + ", ".join(f"{side} {r:6.1f}" for side, r in rates.items())
                      + f" tok/s; window ÷ in-process {rates['window'] / rates['in-process']:.3f}")
    print()
    for name, runs in results.items():
        for side in (s for s in sides if s != "in-process"):
            ratios = [r[side] / r["in-process"] for r in runs]
            logs = [math.log(x) for x in ratios]
            half = 1.96 * statistics.stdev(logs) / math.sqrt(len(logs)) if len(logs) > 1 else float("nan")
            mean = statistics.mean(logs)
            print(f"{name:16s} {side:9s} ÷ in-process: median {statistics.median(ratios):.3f} "
                  f"({min(ratios):.3f}–{max(ratios):.3f}); geometric mean {math.exp(mean):.3f}, "
                  f"95 % interval {math.exp(mean - half):.3f}–{math.exp(mean + half):.3f}")
        print(f"{name:16s} bound on the window's cost (its process's CPU time and the engine's pipe writes, "
              f"over decoding time): median {100 * statistics.median(costs[name]):.1f} %, "
              f"max {100 * max(costs[name]):.1f} %")
        print(f"{name:16s} medians: " + ", ".join(f"{side} {statistics.median(r[side] for r in runs):.1f}"
                                                  for side in sides) + " tok/s")
    reference.stdin.close()
    reference.wait()
    shutil.rmtree(folder, ignore_errors=True)
    worker.shutdown()
    thread.quit()
    thread.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
