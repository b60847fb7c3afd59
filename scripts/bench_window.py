#!/usr/bin/env python3
"""What the cockpit costs: the engine's tokens per second while the whole window shows the reply
(chat text, round strip, charts, footers), against the same generation with no window at all,
interleaved in one run.

    python scripts/bench_window.py [--repeat 8] [-n 256] [--xvfb]

Both sides send the same chat turn through the same path, greedy, on the same pair: the window's
EngineWorker on its QThread and the models in an engine process of their own.
  window     the real MainWindow, shown (offscreen by default; under Xvfb with --xvfb, painting to a
             real X server), its speculation panel and charts visible, the reply streaming into it
  headless   an EngineWorker and its engine process with nothing listening but a counter
The rate compared is the engine's own decoding rate for the reply (GenerationStats.tokens_per_s,
prompt left out), so what the window costs shows as decoding slowed by the CPU the window takes
from the engine (two cores here: every CPU-second the UI thread spends can delay decoding). Each
repeat runs both back to back, in alternating order; the ratio window ÷ headless is taken per
repeat and its median, min-max and a 95 % interval of the geometric mean are printed, per setting.
The window process's CPU time over the decoding time is printed too: a direct bound on its cost.
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
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROMPT = "Write a long story about a dragon who learns to code. Make it at least five paragraphs."
SETTINGS = {"draft model γ=4": {"speculation": True, "drafter": "model", "draft_max": 4, "auto": False},
            "plain": {"speculation": False, "drafter": "model", "draft_max": 4, "auto": False}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-m", "--model", default="smollm2-135m", help="target GGUF or catalogue key")
    parser.add_argument("-md", "--model-draft", default=None, help="draft GGUF (default: the test model's Q2_K)")
    parser.add_argument("-n", "--n-tokens", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=8)
    parser.add_argument("--settings", default=",".join(SETTINGS), metavar="LIST",
                        help=f"which of: {', '.join(SETTINGS)} (default all)")
    parser.add_argument("--xvfb", action="store_true", help="paint to an Xvfb server instead of offscreen")
    parser.add_argument("--size", default="1280x800", help="window size (default 1280x800)")
    args = parser.parse_args()

    xvfb = None
    if args.xvfb:
        display = ":97"
        xvfb = subprocess.Popen(["Xvfb", display, "-screen", "0", "1920x1080x24", "-nolisten", "tcp"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        os.environ["DISPLAY"] = display
        os.environ["QT_QPA_PLATFORM"] = "xcb"
    else:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

    from PySide6.QtCore import QEventLoop, QObject, QThread, QTimer, Signal, Slot
    from PySide6.QtWidgets import QApplication

    from desktop_app import models
    from desktop_app.chat.history import HistoryStore
    from desktop_app.chat.session import GenerationOptions
    from desktop_app.engine import GREEDY, LoadOptions, SpecSettings
    from desktop_app.ui.main_window import MainWindow
    from desktop_app.ui.worker import EngineWorker, GenerateRequest, LoadRequest

    target = models.path_for(args.model)
    # (-md a catalogue key, as -m takes: passed as it was, the window's load failed unsaid, and the script
    # waited ten minutes to say "timed out")
    draft = models.path_for(args.model_draft) if args.model_draft else None
    if draft is None:
        from desktop_app.models.requantize import requantize
        draft = str(requantize(target, os.path.join(os.path.dirname(target), "SmolLM2-135M-Instruct.Q2_K.gguf")))
    threads = max(1, os.cpu_count() or 1)
    options = LoadOptions(n_ctx=2048, n_threads=threads)
    folder = tempfile.mkdtemp(prefix="tandem-bench-window-")
    app = QApplication.instance() or QApplication(sys.argv[:1])   # noqa: F841 (Qt needs it alive)

    def spin_until(predicate, timeout_s: float = 600.0) -> None:
        """Run the event loop as the app does (blocked while nothing happens: a loop that polls would
        take a core from the engine) until `predicate()` holds."""
        deadline = time.monotonic() + timeout_s
        loop = QEventLoop()
        timer = QTimer()
        timer.setInterval(20)
        timer.timeout.connect(lambda: loop.quit() if predicate() or time.monotonic() > deadline else None)
        timer.start()
        if not predicate():
            loop.exec()
        timer.stop()
        if not predicate():
            raise SystemExit("timed out")

    # -- the window
    width, height = (int(x) for x in args.size.split("x"))
    settings_path = os.path.join(folder, "settings.json")
    with open(settings_path, "w") as fh:
        json.dump({"generation": {"temperature": 0.0, "max_tokens": args.n_tokens, "seed": 1}}, fh)
    window = MainWindow(os.path.join(folder, "window.db"), settings_path)
    window.resize(width, height)
    window.show()
    window.load_pair(target, draft)
    spin_until(lambda: (window.loaded is not None and not window.busy) or "Could not" in window.model_bar.status.text())
    if window.loaded is None:
        raise SystemExit(window.model_bar.status.text())
    finished: list = []
    window.worker.finished.connect(lambda _cid, event: finished.append(event.stats))

    def run_window(name: str) -> tuple[float, int, float]:
        window.spec_bar.set_generation({**window.spec_bar.generation(), **SETTINGS[name]})
        window.new_conversation()
        finished.clear()
        cpu = time.process_time()
        window.submit(PROMPT)
        spin_until(lambda: finished and window.generating_id is None and not window.busy)
        settle = time.monotonic() + 0.3                                 # the last repaints
        spin_until(lambda: time.monotonic() > settle)
        cpu = time.process_time() - cpu
        stats = finished[-1]
        return stats.tokens_per_s, stats.n_tokens, cpu / (stats.n_tokens / stats.tokens_per_s)

    # -- headless: the same worker and engine process, nothing but a counter listening
    class Receiver(QObject):
        requestLoad = Signal(object)
        requestGenerate = Signal(object)

        def __init__(self, worker):
            super().__init__()
            self.loop = QEventLoop()
            self.stats = None
            self.n_events = 0
            worker.token.connect(self.on_event)
            worker.round.connect(self.on_event)
            worker.finished.connect(self.on_finished)
            worker.loaded.connect(lambda _info: self.loop.quit())
            self.requestLoad.connect(worker.load)
            self.requestGenerate.connect(worker.generate)

        @Slot(object)
        def on_event(self, _event) -> None:
            self.n_events += 1

        @Slot(int, object)
        def on_finished(self, _cid, event) -> None:
            self.stats = event.stats
            self.loop.quit()

    thread = QThread()
    worker = EngineWorker(os.path.join(folder, "headless.db"))
    worker.moveToThread(thread)
    thread.start()
    receiver = Receiver(worker)
    receiver.requestLoad.emit(LoadRequest(target, draft, options, options))
    receiver.loop.exec()
    headless_store = HistoryStore(os.path.join(folder, "headless.db"))

    def run_headless(name: str) -> tuple[float, int, float]:
        s = SETTINGS[name]
        spec = SpecSettings(enabled=s["speculation"], drafter=s["drafter"], draft_max=s["draft_max"])
        cid = headless_store.create_conversation("bench")
        cpu = time.process_time()
        receiver.requestGenerate.emit(GenerateRequest("send", cid, PROMPT, GenerationOptions(GREEDY, spec, args.n_tokens)))
        receiver.loop.exec()
        cpu = time.process_time() - cpu
        stats = receiver.stats
        return stats.tokens_per_s, stats.n_tokens, cpu / (stats.n_tokens / stats.tokens_per_s)

    print(f"target {os.path.basename(target)}, draft {os.path.basename(draft)}, {args.n_tokens} tokens, "
          f"{args.repeat} repeats, {threads} threads, window {args.size} "
          f"({'Xvfb' if args.xvfb else 'offscreen'})")
    sides = {"window": run_window, "headless": run_headless}
    chosen = args.settings.split(",")
    results: dict[str, list[dict]] = {name: [] for name in chosen}
    for repeat in range(args.repeat + 1):                 # repeat 0 warms both up and is not counted
        for name in chosen:
            order = list(sides) if repeat % 2 else list(reversed(sides))
            got = {}
            for side in order:
                time.sleep(0.3)
                got[side] = sides[side](name)
            counts = {side: n for side, (_, n, _) in got.items()}
            if len(set(counts.values())) > 1:
                print(f"  note: token counts differ: {counts}")
            if repeat:
                results[name].append(got)
                print(f"  {name:16s} repeat {repeat}: " + ", ".join(f"{side} {r:6.1f}" for side, (r, _, _) in got.items())
                      + f" tok/s; window ÷ headless {got['window'][0] / got['headless'][0]:.3f}; window process CPU "
                      f"{100 * got['window'][2]:.0f} % of decoding time (headless {100 * got['headless'][2]:.0f} %)")
    print()
    for name, runs in results.items():
        ratios = [r["window"][0] / r["headless"][0] for r in runs]
        logs = [math.log(x) for x in ratios]
        half = 1.96 * statistics.stdev(logs) / math.sqrt(len(logs)) if len(logs) > 1 else float("nan")
        mean = statistics.mean(logs)
        print(f"{name:16s} window ÷ headless: median {statistics.median(ratios):.3f} "
              f"({min(ratios):.3f}–{max(ratios):.3f}); geometric mean {math.exp(mean):.3f}, "
              f"95 % interval {math.exp(mean - half):.3f}–{math.exp(mean + half):.3f}; medians "
              f"window {statistics.median(r['window'][0] for r in runs):.1f}, "
              f"headless {statistics.median(r['headless'][0] for r in runs):.1f} tok/s; window process CPU "
              f"median {100 * statistics.median(r['window'][2] for r in runs):.0f} % of decoding time, "
              f"headless {100 * statistics.median(r['headless'][2] for r in runs):.0f} %")
    window.close()
    worker.shutdown()
    thread.quit()
    thread.wait()
    headless_store.close()
    shutil.rmtree(folder, ignore_errors=True)
    if xvfb:
        xvfb.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
