"""The speculation panel: every round as it happens — drafted tokens kept (green), the first rejected
one (red, struck through), the target's own token (orange: a correction; blue: a bonus; grey: plain
decoding) — with live speed, acceptance, and a plain-words verdict on whether speculation pays."""
from __future__ import annotations

import html
import time
from dataclasses import dataclass

from PySide6.QtCore import QTimer
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QGridLayout, QGroupBox, QLabel, QTextBrowser, QVBoxLayout, QWidget

from desktop_app.engine.events import GenerationStats, RoundEvent
from desktop_app.engine.explain import explain

MAX_ROUNDS_SHOWN = 300


@dataclass(frozen=True)
class RoundView:
    index: int
    drafter: str
    drafted: tuple[str, ...]
    accepted: int
    last: str
    last_kind: str                 # correction, bonus or plain
    q: tuple[float, ...]
    p: tuple[float, ...]
    t_draft_s: float
    t_verify_s: float

    @classmethod
    def from_event(cls, r: RoundEvent) -> "RoundView":
        return cls(r.index, r.drafter, r.drafted_text, r.accepted, r.emitted_text[-1], r.kinds[-1].value,
                   r.q, r.p, r.t_draft_s, r.t_verify_s)



def _visible(text: str) -> str:
    shown = text.replace("\n", "⏎").replace("\t", "⇥")
    return html.escape(shown).replace(" ", "&nbsp;") or "∅"


class Colours:
    def __init__(self, dark: bool):
        if dark:
            self.accepted, self.rejected, self.correction, self.bonus, self.plain = (
                "#1f5130", "#6b2228", "#6b4a12", "#1d3f6e", "#3a3a3a")
        else:
            self.accepted, self.rejected, self.correction, self.bonus, self.plain = (
                "#c8efd2", "#f6c6c9", "#fbe0b5", "#cfe0fb", "#e4e4e4")


class SpecPanel(QWidget):
    REPAINT_MS = 100

    def __init__(self, parent=None):
        super().__init__(parent)
        dark = self.palette().color(QPalette.Window).lightness() < 128
        self.colours = Colours(dark)
        layout = QVBoxLayout(self)
        stats_box = QGroupBox("This reply")
        grid = QGridLayout(stats_box)
        self.labels: dict[str, QLabel] = {}
        for i, (key, title) in enumerate([("speed", "Speed"), ("tokens", "Tokens"), ("accepted", "Drafts kept"),
                                          ("alpha", "α (per-token)"), ("per_round", "Kept per round"),
                                          ("split", "Draft / verify time"), ("c", "Draft step cost c"),
                                          ("predicted", "Predicted speed-up")]):
            grid.addWidget(QLabel(title), i // 2, 2 * (i % 2))
            value = QLabel("–")
            value.setObjectName(f"stat_{key}")
            value.setWordWrap(True)
            self.labels[key] = value
            grid.addWidget(value, i // 2, 2 * (i % 2) + 1)
        layout.addWidget(stats_box)
        self.verdict = QLabel("Send a message to see speculation at work.")
        self.verdict.setWordWrap(True)
        self.verdict.setObjectName("verdict")
        layout.addWidget(self.verdict)
        c = self.colours
        legend = QLabel(
            f'<span style="background:{c.accepted}">&nbsp;kept draft&nbsp;</span> '
            f'<span style="background:{c.rejected}"><s>&nbsp;rejected&nbsp;</s></span> '
            f'<span style="background:{c.correction}">&nbsp;correction&nbsp;</span> '
            f'<span style="background:{c.bonus}">&nbsp;bonus&nbsp;</span> '
            f'<span style="background:{c.plain}">&nbsp;plain&nbsp;</span>')
        layout.addWidget(legend)
        self.rounds_view = QTextBrowser()
        self.rounds_view.setObjectName("roundsView")
        self.rounds_view.setOpenLinks(False)
        layout.addWidget(self.rounds_view, 1)
        self._pending: list[RoundView] = []
        self._rows: list[str] = []
        self._started = 0.0
        self._first_token_at: float | None = None
        self._n_tokens = 0
        self._drafted = self._accepted = 0
        self._timer = QTimer(self)
        self._timer.setInterval(self.REPAINT_MS)
        self._timer.timeout.connect(self._flush)

    # -- live
    def begin(self) -> None:
        self._pending, self._rows = [], []
        self.rounds_view.clear()
        self._started = time.monotonic()
        self._first_token_at = self._last_token_at = None
        self._n_tokens = self._drafted = self._accepted = 0
        for label in self.labels.values():
            label.setText("–")
        self.verdict.setText("Generating…")
        self._timer.start()

    def add_round(self, r: RoundEvent) -> None:
        self._pending.append(RoundView.from_event(r))
        self._drafted += r.gamma
        self._accepted += r.accepted

    def add_token(self) -> None:
        self._last_token_at = time.monotonic()
        if self._first_token_at is None:
            self._first_token_at = self._last_token_at
        self._n_tokens += 1

    def _flush(self) -> None:
        if self._pending:
            rows = [self._row(r) for r in self._pending]
            self._pending = []
            self._rows.extend(rows)
            if len(self._rows) > MAX_ROUNDS_SHOWN:
                self._rows = self._rows[-MAX_ROUNDS_SHOWN:]
                self.rounds_view.setHtml("".join(self._rows))
            else:
                for row in rows:
                    self.rounds_view.append(row)
        if self._first_token_at is not None:
            elapsed = self._last_token_at - self._first_token_at
            if elapsed > 0 and self._n_tokens > 1:
                self.labels["speed"].setText(f"{(self._n_tokens - 1) / elapsed:.1f} tok/s")
        self.labels["tokens"].setText(str(self._n_tokens))
        if self._drafted:
            self.labels["accepted"].setText(f"{self._accepted}/{self._drafted} ({100 * self._accepted / self._drafted:.0f} %)")

    def finish(self, stats: GenerationStats) -> None:
        self._flush()
        self._timer.stop()
        self.show_stats(stats)

    @property
    def live(self) -> bool:
        """A reply is streaming into the panel."""
        return self._timer.isActive()

    def interrupt(self, why: str) -> None:
        """The reply ended without its statistics (the engine stopped): keep what was seen, say so."""
        self._flush()
        self._timer.stop()
        self.verdict.setText(why)

    # -- a finished or stored reply
    def show_stats(self, s: GenerationStats) -> None:
        L = self.labels
        L["speed"].setText(f"{s.tokens_per_s:.1f} tok/s")
        L["tokens"].setText(f"{s.n_tokens} (first after {1000 * s.ttft_s:.0f} ms)")
        if s.n_drafted:
            L["accepted"].setText(f"{s.n_accepted}/{s.n_drafted} ({100 * s.acceptance_rate:.0f} %)")
            L["alpha"].setText(f"{s.alpha:.2f}" if s.alpha is not None else "–")
            L["per_round"].setText(f"{s.mean_accepted:.2f} of {s.mean_drafted:.2f}")
            L["split"].setText(f"{s.t_draft_s:.2f} s / {s.t_verify_s:.2f} s")
            L["c"].setText(f"{s.c:.2f}" if s.c is not None else "–")
            if s.predicted_speedup_measured is not None:
                L["predicted"].setText(f"{s.predicted_speedup_measured:.2f}× (flat-cost formula: {s.predicted_speedup:.2f}×)"
                                       if s.predicted_speedup is not None else f"{s.predicted_speedup_measured:.2f}×")
        else:
            for key in ("accepted", "alpha", "per_round", "split", "c", "predicted"):
                L[key].setText("–")
        self.verdict.setText(explain(s))

    def show_stored(self, rounds: list[dict] | None, stats: dict | None) -> None:
        self._timer.stop()
        self._pending = []
        self._rows = [self._row(RoundView.from_event(RoundEvent.from_record(i, r))) for i, r in enumerate(rounds or [])][-MAX_ROUNDS_SHOWN:]
        self.rounds_view.setHtml("".join(self._rows))
        if stats:
            known = {k: v for k, v in stats.items() if k in GenerationStats.__dataclass_fields__}
            self.show_stats(GenerationStats(**known))

    def _row(self, r: RoundView) -> str:
        c = self.colours
        cells = []
        for i, text in enumerate(r.drafted):
            tip = f"q={r.q[i]:.3f} p={r.p[i]:.3f}" if i < len(r.q) and i < len(r.p) else ""
            if i < r.accepted:
                cells.append(f'<span style="background:{c.accepted}" title="{tip}">{_visible(text)}</span>')
            elif i == r.accepted:
                cells.append(f'<span style="background:{c.rejected}" title="{tip}"><s>{_visible(text)}</s></span>')
            else:
                cells.append(f'<span style="color:gray"><s>{_visible(text)}</s></span>')
        colour = {"correction": c.correction, "bonus": c.bonus}.get(r.last_kind, c.plain)
        cells.append(f'<span style="background:{colour}" title="{r.last_kind}">{_visible(r.last)}</span>')
        timing = f"{1000 * r.t_draft_s:.0f}+{1000 * r.t_verify_s:.0f} ms"
        return (f'<div style="margin:0"><span style="color:gray">#{r.index + 1} {timing}</span>&nbsp; '
                + " ".join(cells) + "</div>")
