#!/usr/bin/env python3
"""What the window's own drawing costs per token, with no engine: a reply recorded by
`tandem generate --json` is replayed into the real MainWindow (the chat text, the speculation bar,
the panel's strip, numbers and charts) at a fixed rate, and the window process's CPU time is divided by
the tokens. Deterministic text, so two versions of the window can be compared run against run
(scripts/bench_window.py measures the engine's speed beside the window instead).

    tandem generate -m qwen2.5-coder-1.5b --auto -p "Write a Python function that checks whether a number is prime." --json > reply.json
    QT_QPA_PLATFORM=offscreen python scripts/window_render_cost.py reply.json [--rate 12] [--repeat 1]
    (or under Xvfb, DISPLAY set, to paint to a real X server)
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("reply", help="the JSON `tandem generate --json` printed")
    ap.add_argument("--rate", type=float, default=12.0, help="tokens a second (default 12)")
    ap.add_argument("--repeat", type=int, default=1, help="play the reply's rounds this many times over")
    a = ap.parse_args()
    os.environ.setdefault("TANDEM_DATA_DIR", tempfile.mkdtemp())
    os.environ.setdefault("TANDEM_CONFIG_DIR", tempfile.mkdtemp())
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication
    app = QApplication(sys.argv[:1])
    from desktop_app.engine.events import RoundEvent, TokenEvent
    from desktop_app.ui.main_window import MainWindow

    with open(a.reply, encoding="utf-8") as fh:
        sample = json.load(fh)["samples"][0]
    events, n = [], 0
    for i, r in enumerate(sample["rounds"] * a.repeat):
        event = RoundEvent.from_json(i, r, "lookup" if r["drafted"] else "none")   # (a drafter for the strip)
        events.append(event)
        for token, text, kind in zip(event.emitted, event.emitted_text, event.kinds):
            events.append(TokenEvent(token, text, kind, n))
            n += 1
    window = MainWindow()
    window.resize(1280, 800)
    window.show()
    window.reply.start(1)
    window.reply.began(1, 1, "replay")               # as if conversation 1 were generating and shown
    pending = iter(events)

    def step():
        for event in pending:
            if isinstance(event, RoundEvent):
                window.reply.round(event)
                continue
            window.reply.token(event, 1)
            QTimer.singleShot(int(1000 / a.rate), step)
            return
        app.quit()

    QTimer.singleShot(1000, step)
    cpu, wall = time.process_time(), time.time()
    app.exec()
    cpu, wall = time.process_time() - cpu, time.time() - wall
    print(f"{n} tokens in {wall:.1f} s; the window's CPU {cpu:.2f} s, {1000 * cpu / n:.1f} ms a token")
    return 0


if __name__ == "__main__":
    sys.exit(main())
