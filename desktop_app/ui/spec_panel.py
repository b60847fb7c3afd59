"""The speculation panel: which reply it shows, that reply's numbers (measured and predicted, labelled
as such, from the one GenerationStats), a plain-words verdict that agrees with them, every round
in the round strip (ui/round_strip.py) as it happens or as the history stored it, and under it the
live charts (ui/charts.py) and "Does it pay?" (ui/pay_curve.py) for the same reply."""
from __future__ import annotations

import time
from dataclasses import replace
from typing import Sequence

from PySide6.QtCore import QSize, Qt, QTimer
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (QGridLayout, QGroupBox, QLabel, QSplitter, QTabWidget, QVBoxLayout,
                               QWidget)

from desktop_app.chat.reply_footer import ending, reading_note
from desktop_app.chat.rules import reply_status
from desktop_app.engine.auto_policy import FIRST_PROBE
from desktop_app.engine.events import GenerationStats, PromptEvent, RoundEvent, StopReason
from desktop_app.engine.explain import brief, end_text, explain, measured_text, predicted_text
from desktop_app.engine.number_text import alpha_text, duration_text, rate_text, rates_finer, share_text
from desktop_app.engine.metrics import StatsRecorder, from_rounds
from desktop_app.remote.rounds import DRAFTER as SERVER_DRAFTER
from desktop_app.ui.charts import PLAIN_EARLIER, PLAIN_ESTIMATE_MIN, PLAIN_SO_FAR, LiveCharts
from desktop_app.ui.panel_rows import STATS, reply_header, stored_header, tokens_forms
from desktop_app.ui.pay_curve import PayCurve
from desktop_app.ui.round_strip import Colours, RoundStrip
from desktop_app.ui.sentence_label import SentenceLabel
from desktop_app.ui.stat_label import StatLabel

NO_REPLY = "No reply selected"
GENERATING = "Generating…"       # after reading_note's (this with "Tokens –" for a minute read as stuck)
class RoundsBox(QWidget):
    """The legend over the round strip. Its minimum height counts the legend as wrapped at the width
    it has: a layout counts a wrapped label's one-line height, and the splitter would then clip the
    strip's last rows."""

    def __init__(self, legend: QLabel, strip: QWidget, parent=None):
        super().__init__(parent)
        self.legend = legend
        v = QVBoxLayout(self)
        v.setContentsMargins(0, 0, 0, 0)
        v.addWidget(legend)
        v.addWidget(strip, 1)

    def minimumSizeHint(self) -> QSize:
        hint = super().minimumSizeHint()
        wrapped = self.legend.heightForWidth(self.legend.width()) - self.legend.minimumSizeHint().height()
        return QSize(hint.width(), hint.height() + max(0, wrapped))

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self.updateGeometry()                    # a new width can wrap the legend on more or fewer lines


class SpecPanel(QWidget):
    REPAINT_MS = 250             # the strip and the live numbers are updated at most this often: each
                                 # repaint takes CPU from the engine (scripts/bench_window.py measures it)

    def __init__(self, parent=None):
        super().__init__(parent)
        dark = self.palette().color(QPalette.Window).lightness() < 128
        self.colours = Colours(dark)
        layout = QVBoxLayout(self)
        self.header = QLabel(NO_REPLY)
        self.header.setObjectName("panelHeader")
        self.header.setWordWrap(True)
        self.header.setTextFormat(Qt.PlainText)
        layout.addWidget(self.header)
        stats_box = QGroupBox("This reply")
        grid = QGridLayout(stats_box)
        grid.setColumnStretch(1, 1)
        grid.setContentsMargins(6, 4, 4, 4)
        grid.setHorizontalSpacing(8)
        grid.setVerticalSpacing(2)
        self.labels: dict[str, StatLabel] = {}
        self.titles: dict[str, QLabel] = {}
        for i, (key, title, tip) in enumerate(STATS):
            name = QLabel(title)
            name.setWordWrap(False)
            name.setToolTip(tip)
            value = StatLabel(explanation=tip)
            value.setObjectName(f"stat_{key}")
            self.titles[key], self.labels[key] = name, value
            grid.addWidget(name, i, 0)
            grid.addWidget(value, i, 1)
        layout.addWidget(stats_box)
        self.verdict = SentenceLabel("Send a message to see speculation at work.")
        self.verdict.setObjectName("verdict")
        layout.addWidget(self.verdict)
        self.legend = QLabel(self.colours.legend_html())
        self.legend.setObjectName("legend")
        self.legend.setWordWrap(True)
        self.legend.setToolTip("Kept drafts; the first rejected draft; drafts after it (discarded, not judged); "
                               "the target's token: a correction, a bonus (all drafts kept) or a plain step; "
                               "the end of the reply")
        self.strip = RoundStrip(self.colours)
        rounds = RoundsBox(self.legend, self.strip)
        self.charts = LiveCharts()
        self.pay = PayCurve()
        self.views = QTabWidget()
        self.views.setObjectName("panelViews")
        self.views.addTab(self.charts, "Charts")
        self.views.addTab(self.pay, "Does it pay?")
        self.views.setMinimumWidth(200)           # the plots shrink with the panel instead of widening it
        self.split = QSplitter(Qt.Vertical)
        self.split.setChildrenCollapsible(False)
        self.split.addWidget(rounds)
        self.split.addWidget(self.views)
        self.split.setSizes([300, 360])
        layout.addWidget(self.split, 1)

        self._pending: list[RoundEvent] = []
        self._live_rounds: list[RoundEvent] = []     # every round of the reply generating now
        self._read: PromptEvent | None = None        # how far its prompt has been read, before its first round
        self._attached = False        # the strip shows the live reply (not a stored one, not cleared)
        self._streaming = False
        self._live_title = ""
        self._round_base = self._tokens_base = 0     # a continued reply's earlier rounds and tokens (begin;
                                                     # 0: a reply not continued)
        self._live_conversation: int | None = None
        self._live_began = time.localtime()
        self._live_number: int | None = None
        self._shown: tuple | None = None   # the header's reply: ("live",) or ("stored", conversation,
                                           # title, created_at, number, status, stats); None: none
        self._live_stats: GenerationStats | None = None
        self._broke_off = False       # the live reply broke off (FinishEvent.broke_off): not "stopped"
        self._plain_known: float | None = None   # plain decoding's rate with the loaded pair, as last known
        self._round_s = 0.0           # the live reply's rounds: seconds, on the engine's clock (as the
        self._round_tokens = 0        # chart's), and the tokens they emitted
        self._began_at = 0.0                          # when the live reply began (monotonic)
        self._first_token_at: float | None = None    # when tokens reached the panel: the live speed of a
        self._last_token_at: float | None = None     # reply without rounds yet (a llama-server's untimed)
        self._n_tokens = 0
        self._recorder = StatsRecorder(0, 0)      # the live reply's rounds, counted as its end will count them
        self._timer = QTimer(self)
        self._timer.setInterval(self.REPAINT_MS)
        self._timer.timeout.connect(self._flush)

    # -- what the panel shows
    def heightForWidth(self, width: int) -> int:
        """The height it needs at `width`: its wrapped sentences whole, the rounds and charts at their
        least (the scroll area it sits in gives it this or the whole page, whichever is more; the
        preferred height would be the strip's every round)."""
        h = super().heightForWidth(width)
        if h < 0:
            return h
        return h - max(0, self.split.sizeHint().height() - self.split.minimumSizeHint().height())

    def _reset_numbers(self, verdict: str) -> None:
        for label in self.labels.values():
            label.setText("–")
        self.verdict.setText(verdict)

    def clear(self) -> None:
        """Show no reply (a new conversation, another one, a deleted one). A reply still generating goes
        on being recorded: `show_live` brings it back."""
        self._attached = False
        self._pending = []
        self.strip.clear()
        self.charts.clear()
        self.pay.clear()
        self._shown = None
        self.header.setText(NO_REPLY)
        self._reset_numbers("")

    def retitle(self, conversation_id: int, title: str) -> None:
        """A conversation renamed: the header of its reply shown, and of its live one, say so (they kept
        the old name: a user's try)."""
        if self._live_conversation == conversation_id:
            self._live_title = title
        if self._shown and self._shown[0] == "stored" and self._shown[1] == conversation_id:
            self._shown = ("stored", conversation_id, title, *self._shown[3:])
        if self._shown:
            self._show_header()

    def _show_header(self) -> None:
        """Which reply the panel shows: live, finished, or from the history."""
        if self._shown[0] == "stored":
            self.header.setText(stored_header(*self._shown[2:]))
        elif self._streaming:
            what = "continuing the reply" if self._round_base else "reply"
            self.header.setText(f"Live: {what} in '{self._live_title}'")
        else:                       # how it ended ("just finished" stayed on minutes later, and was said
            s = self._live_stats    # of stopped, interrupted and cut-off replies: users' tries)
            status = "interrupted" if s is None else reply_status(s.stop_reason, self._broke_off)
            self.header.setText(reply_header(self._live_title, self._live_began, self._live_number, ending(status, s)))

    # -- live
    def begin(self, title: str = "", conversation_id: int | None = None, earlier: Sequence[RoundEvent] = (),
              began: float | None = None) -> None:
        """A reply begins. Continued (Continue), it is the reply that began at `began` (epoch seconds)
        with the rounds `earlier`: the panel tells the whole of it as the new rounds come, their
        numbers, tokens, speed and acceptance (the first run's first token, at its end)."""
        self._live_rounds, self._pending = list(earlier), []
        self._round_base = len(earlier)           # (the new rounds are numbered on from them)
        self._live_title = title
        self._live_conversation = conversation_id
        self._live_began = time.localtime(began)  # (the history dates a reply from its start, as here)
        self._live_number = None                  # its place in the conversation, once it has ended
        self._live_stats, self._broke_off = None, False
        self._round_s = sum(r.t_round_s for r in earlier)
        self._round_tokens = sum(r.n_reply_tokens for r in earlier)
        self._first_token_at = self._last_token_at = None
        self._began_at = time.monotonic()        # (the first token's time, live, until the engine's at the end)
        self._n_tokens = self._tokens_base = self._round_tokens
        self._read = None
        self._recorder = StatsRecorder(0, 0)
        for r in earlier:
            self._recorder.add_round(r, r.gamma)
        self._streaming = self._attached = True
        if earlier:
            self.strip.set_rounds(self._live_rounds)
            self.charts.show_stored(self._live_rounds, None, self._plain_known)
        else:
            self.strip.clear()
            self.charts.begin(self._plain_known)
        self.pay.waiting()
        self._shown = ("live",)
        self._show_header()
        self._reset_numbers(reading_note(None).capitalize())
        self._timer.start()

    def show_live(self) -> None:
        """Show the reply generating now again (after `clear`), from its first round."""
        if not self._streaming:
            return
        self._attached = True
        self._pending = []
        self.strip.set_rounds(self._live_rounds)
        self.charts.show_stored(self._live_rounds, None, self._plain_known)   # (set at the reply's end)
        self.pay.waiting()
        self._shown = ("live",)
        self._show_header()
        self._reset_numbers(reading_note(self._read).capitalize())
        self._flush()

    def reading(self, read: PromptEvent) -> None:
        """How far the live reply's prompt has been read."""
        self._read = read
        if self._attached and self._streaming and not self._run_began:
            self.verdict.setText(reading_note(read).capitalize())

    def add_round(self, r: RoundEvent) -> None:
        if self._round_base:
            r = replace(r, index=r.index + self._round_base)
        self._read = None
        self._live_rounds.append(r)
        self._recorder.add_round(r, r.gamma)
        self._round_s += r.t_round_s
        self._round_tokens += r.n_reply_tokens
        if self._attached:
            self._pending.append(r)
            self.charts.add_round(r)

    @property
    def _run_began(self) -> bool:
        """The running reply's run has a round or a token (a continued reply's earlier ones not counted)."""
        return len(self._live_rounds) > self._round_base or self._n_tokens > self._tokens_base

    def add_token(self) -> None:
        self._last_token_at = time.monotonic()
        if self._first_token_at is None:
            self._first_token_at = self._last_token_at
        self._n_tokens += 1

    def _flush(self) -> None:
        if not self._attached:
            return
        if self._pending:
            self.strip.append(self._pending)
            self._pending = []
        if not self._streaming:
            return
        if self._run_began and self.verdict.text() != GENERATING:
            self.verdict.setText(GENERATING)
        if self._round_s > 0 and self._round_tokens:        # as the tokens/s chart counts them
            speed = self._round_tokens / self._round_s
            self.labels["speed"].setText(rate_text(speed))
            plain, label = self.charts.shown_plain_rate()   # (its estimate until the reply ends, as the chart's)
            if plain and label in (PLAIN_SO_FAR, PLAIN_EARLIER):
                when = "so far" if label == PLAIN_SO_FAR else "earlier"
                self.labels["vs_plain"].setText(f"≈ {speed / plain:.2f}× (plain ≈ {rate_text(plain)}, {when})",
                                                f"≈ {speed / plain:.2f}× of {rate_text(plain)}")
        elif self._first_token_at is not None and self._n_tokens > 1 and self._last_token_at > self._first_token_at:
            elapsed = self._last_token_at - self._first_token_at   # (no rounds yet: as the tokens came)
            self.labels["speed"].setText(rate_text((self._n_tokens - 1) / elapsed))
        if self._first_token_at is not None and not self._round_base:   # (a continued one's: its first run's, at the end)
            self.labels["first"].setText(f"≈ {duration_text(self._first_token_at - self._began_at)}")
        rounds = len(self._live_rounds)
        tokens = str(self._n_tokens)
        self.labels["tokens"].setText(*tokens_forms(tokens, rounds))
        so_far = self._recorder.so_far()
        if not so_far.n_drafted:
            if self._live_rounds:                # (plain rounds so far: "–" beside the time chart's bars, a
                self._show_split(so_far)         # new user's try)
            return
        self._show_drafts(so_far)
        remote = any(r.drafter == SERVER_DRAFTER for r in self._live_rounds)   # (a llama-server sends neither)
        for key in ("c", "predicted"):           # (they rest on the engine's costs, which come with the end;
            self.labels[key].setText("–" if remote else "at the reply's end")   # "–" read as unmeasured)

    def set_plain_rate(self, rate: float | None) -> None:
        """Plain decoding's rate with the pair just loaded (from its single-token pass timed at load;
        None: not known), which later replies' measurements replace: what a reply compares itself with
        until it times plain steps of its own."""
        self._plain_known = rate or None

    def finish(self, stats: GenerationStats, end: str = "", broke_off: bool = False, number: int | None = None) -> None:
        """`end`: FinishEvent.end_after_rounds, the mark the last round gets (as the history stores it);
        `broke_off`: FinishEvent.broke_off (a llama-server's reply whose connection broke read "stopped"
        in the panel, as if the user had stopped it, where the chat said "interrupted"); `number`: the
        reply's place in its conversation, as the history has it (None: not known)."""
        self._live_number = number
        self._flush()
        if self._live_rounds and end and not self._live_rounds[-1].end:
            last = self._live_rounds[-1] = replace(self._live_rounds[-1], end=end)
            if self._attached:
                self.strip.end_last(last)
        self._timer.stop()
        self._streaming = False
        self._live_stats = stats
        self._broke_off = broke_off
        if stats.plain_tokens_per_s and not stats.remote and stats.n_rounds >= PLAIN_ESTIMATE_MIN \
                and stats.stop_reason != StopReason.CANCELLED.value:   # (a reply of a round or two: mostly noise)
            self._plain_known = stats.plain_tokens_per_s
        if self._attached:
            self._show_header()
            self.charts.finish(stats)
            self.show_stats(stats)
            if broke_off and not stats.n_tokens:        # (not "stopped after", "Stopped before the first token")
                self._show_broke_off(stats)

    def _show_broke_off(self, stats: GenerationStats) -> None:
        """A reply that broke off before its first token (a llama-server's connection), live or stored."""
        self.labels["first"].setText(f"none (broke off after {duration_text(stats.ttft_s)})")
        self.verdict.setText("The reply broke off before its first token: nothing was written.")

    @property
    def live(self) -> bool:          # a reply is streaming into the panel
        return self._streaming

    def interrupt(self, why: str, number: int | None = None) -> None:
        """The reply ended without its statistics (the engine stopped): keep what was seen, say so.
        `number`: as finish's."""
        self._live_number = number
        self._flush()
        self._timer.stop()
        self._streaming = False
        if self._attached:
            self._show_header()                  # (it went on saying "Live": a user's try)
            self.verdict.setText(why)
            self.pay.clear()                     # (no statistics: no curve will come)
            for key in ("c", "predicted"):       # (nor the end that was to bring these)
                self.labels[key].setText("–")

    def _show_drafts(self, s: GenerationStats) -> None:
        """Drafts kept, α, kept per round and the time split: live as rounds come, and at the end."""
        L = self.labels
        L["accepted"].setText(f"{s.n_accepted}/{s.n_drafted} ({share_text(s.acceptance_rate or 0)})")
        L["alpha"].setText(alpha_text(s.alpha) if s.alpha is not None else "–")
        L["per_round"].setText(f"{s.mean_accepted:.2f} of {s.mean_drafted:.2f}")
        self._show_split(s)

    def _show_split(self, s: GenerationStats) -> None:
        split = f"{s.t_draft_s:.2f} s / {s.t_verify_s:.2f} s" if s.t_draft_s or s.t_verify_s else "–"
        self.labels["split"].setText("not sent by the server" if s.remote else split)

    # -- a finished or stored reply
    def show_stats(self, s: GenerationStats) -> None:
        L = self.labels
        finer = rates_finer(s)                  # (a digit more where "115" beside "0.99× (plain 115)" would not add up)
        L["speed"].setText(rate_text(s.tokens_per_s if s.n_tokens else None, finer))      # (no token: no rate)
        m = s.measured_speedup
        L["vs_plain"].setText(measured_text(s), f"{m:.2f}× of {rate_text(s.plain_tokens_per_s, finer)}" if m else "")
        L["tokens"].setText(*tokens_forms(f"{s.n_tokens}{end_text(s)}", s.n_rounds))   # ("13 + end": the rounds
                                                                                      # wrote the end too)
        # (the first token's time in a row of its own: beside the rounds, one or the other was left out in a
        # narrow panel, "37 + end in 38 (first 1.64 s)" reading "38 what?", new users' tries)
        first = duration_text(s.ttft_s)
        if s.n_tokens:                            # (none known: a reply continued after the engine died)
            L["first"].setText(first if s.ttft_s else "–")
        else:                     # (no first token came: "first after 4.01 s" read as if one had, a new user's try)
            L["first"].setText(f"none ({'stopped' if s.stop_reason == StopReason.CANCELLED.value else 'ended'} "
                               f"after {first})")
        unused = s.unused_draft_c if s.n_rounds > FIRST_PROBE else None   # (the price auto weighed a draft
        if s.n_drafted:                                                   # model left unused at: the sentence
            self._show_drafts(s)                                          # quotes it)
            if s.c is None or s.c or unused is None:
                L["c"].setText("–" if s.c is None else f"{s.c:.2f} × a pass" if s.c else "none (lookup only)")
            else:                                 # (the short form: "0.48 × a pass (…)" at 1366 px, a new user's try)
                L["c"].setText(f"{unused:.2f} × a pass (not drafted: lookup only)", f"{unused:.2f} × a pass (not drafted)",
                               f"{unused:.2f} (not drafted)")             # ("0.54 × a pass (…)" at 1024 px)
            L["predicted"].setText(predicted_text(s), predicted_text(s, compact=True))
        else:
            for key in ("accepted", "alpha", "per_round", "predicted"):
                L[key].setText("–")
            L["c"].setText("–" if unused is None else f"{unused:.2f} × a pass (not drafted)",   # (its unit, as
                           "" if unused is None else f"{unused:.2f} (not drafted)")          # when drafted)
            self._show_split(s)                  # (a plain reply's time is the target's: "–" beside the chart
                                                 # showing it read as a failure to measure, a new user's try)
        self.verdict.setText(explain(s), brief(s))
        self.pay.show(s, max(1, round(s.mean_drafted)) if s.mean_drafted else 0)   # the γ this reply used

    def show_stored(self, rounds: list[dict] | None, stats: dict | None, conversation_id: int, title: str,
                    created_at: float, number: int, status: str = "done") -> None:
        """A reply from the history (message `number` of conversation `conversation_id`, titled
        `title`, stored with `status`): its stored rounds and statistics, or where it has none (the
        engine died as it was written) what its rounds say."""
        self._attached = False
        self._pending = []
        self._shown = ("stored", conversation_id, title, created_at, number, status, stats)
        self._show_header()
        events = [RoundEvent.from_record(i, r) for i, r in enumerate(rounds or [])]
        self.strip.set_rounds(events)
        self._reset_numbers("")
        self.pay.clear()
        parsed = GenerationStats.from_json(stats) if stats else None
        self.charts.show_stored(events, parsed)
        if parsed is not None:
            self.show_stats(parsed)
            if status == "interrupted" and not parsed.n_tokens:   # (stats kept: a connection that broke; an
                self._show_broke_off(parsed)                     # engine that died keeps none)
        elif events:                              # (none kept: what its rounds say, as the panel said live)
            s = from_rounds(events)
            self.labels["speed"].setText(rate_text(s.tokens_per_s) if s.tokens_per_s else "–")
            self.labels["tokens"].setText(*tokens_forms(str(s.n_tokens), s.n_rounds))
            (self._show_drafts if s.n_drafted else self._show_split)(s)
            why = ("Its statistics were not kept" if status == "done"     # (an import that left them out)
                   else f"{ending(status, None).capitalize()} before its statistics were recorded")
            self.verdict.setText(f"{why}: the figures here are counted from its rounds.")

    @property
    def rounds_shown(self) -> list[RoundEvent]:
        """The rounds in the strip now (pending ones included)."""
        return self.strip.round_model.rounds + list(self._pending)
