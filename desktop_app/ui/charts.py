"""Live charts of one reply, drawn from its rounds (the RoundEvents the speculation panel shows, or the
stored ones read back with RoundEvent.from_record): speed over time against plain decoding's, acceptance
by draft position, tokens kept per round, and where the time went.

Events are only buffered as they arrive; a QTimer redraws at most every REDRAW_MS, never per token.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPalette
from PySide6.QtWidgets import QGridLayout, QLabel, QVBoxLayout, QWidget

from desktop_app.engine.events import GenerationStats, RoundEvent
from desktop_app.engine.number_text import rate_number, rates_finer
from desktop_app.engine.metrics import plain_rate_so_far
from desktop_app.ui.elided import ElidedLabel

DRAFTER_COLOURS = {"model": "#2ca02c", "lookup": "#9467bd", "server": "#1f77b4", "none": "#8c8c8c"}
DRAFTER_NAMES = {"model": "model", "lookup": "lookup", "server": "server", "none": "plain"}
KEPT_TITLES = ("Kept in each round", "Kept each round", "Kept")   # the first that fits on one line with the legend
# (not "Kept per drafted round", the panel's mean over the rounds that drafted: this plots every round, plain ones at 0)
SPLIT = (("draft", "#1f77b4"), ("target", "#ff7f0e"), ("other", "#8c8c8c"))   # target: checking drafts and plain steps


def stats_from(stats: GenerationStats | Mapping | None) -> GenerationStats | None:
    """A GenerationStats from itself or from its stored JSON (fields this version does not know are
    left out; verify_s_by_batch's keys become ints again in GenerationStats itself)."""
    return GenerationStats.from_json(stats)


def rounds_from(rounds: Sequence[RoundEvent | Mapping] | None) -> list[RoundEvent]:
    """RoundEvents from themselves or from the history's records (RoundEvent.from_record)."""
    return [r if isinstance(r, RoundEvent) else RoundEvent.from_record(i, r) for i, r in enumerate(rounds or [])]


def rolling_rate(times: Sequence[float], origin: float, min_tokens: int = 16, min_span_s: float = 0.25,
                 burst_s: float = 0.01, end: float | None = None) -> tuple[list[float], list[float]]:
    """Tokens per second at each arrival (seconds since origin, rate), over a window reaching back at
    least min_tokens tokens and at least min_span_s seconds (clipped at the origin). Tokens arriving
    within burst_s of each other (one round's) are one burst, sampled once, at its last token; tokens
    of the burst at the origin open the window and are not counted in it. `end`: when the last round
    ended, if after the last token (the round that wrote only the end-of-generation token): one more
    sample there, over the same tokens, so the curve ends at the reply's own pace (without it, a
    short reply's curve ended above its speed by that round's share of the time)."""
    xs, ys = [], []

    def sample(k: int, t: float) -> None:             # the window ending with token k, read at time t
        j = k - min_tokens
        while j >= 0 and times[j] > t - min_span_s:
            j -= 1
        if j < 0:
            j = -1                                    # back to the origin: count every token after it
            while j + 1 < k and times[j + 1] - origin <= burst_s:
                j += 1
        start = origin if j < 0 else times[j]
        if t - start > burst_s:
            xs.append(t - origin)
            ys.append((k - j) / (t - start))

    for k, t in enumerate(times):
        if k + 1 < len(times) and times[k + 1] - t <= burst_s:
            continue                                  # the rest of this burst arrives with it
        sample(k, t)
    if end is not None and times and end - times[-1] > burst_s:
        sample(len(times) - 1, end)
    return xs, ys


SPEED_TITLE = "Tokens/s over time (s)"
PLAIN_ESTIMATE_MIN = 3       # plain rounds before the chart and the panel estimate plain's rate mid-reply
PLAIN_SO_FAR, PLAIN_EARLIER = "plain ≈", "plain (earlier)"   # plain_rate's labels of its estimates


def label_backing(bg: QColor) -> QColor:
    """A label's backing, in the plot's colour: no line strikes the label."""
    backing = QColor(bg)
    backing.setAlpha(220)
    return backing


class WholeAxis(pg.AxisItem):
    """An axis of counts (draft positions, rounds, tokens): ticks on whole numbers only, never 1.5.
    (Chosen as it paints: setting ticks from outside at every redraw stalled the UI thread.)"""

    def tickValues(self, minVal, maxVal, size):
        levels = []
        for spacing, values in super().tickValues(minVal, maxVal, size):
            whole = [v for v in values if abs(v - round(v)) < 1e-9]
            if whole:
                levels.append((max(1.0, spacing), whole))
        return levels


class SparseAxis(pg.AxisItem):
    """A horizontal axis whose numbers never run together: at most one every TICK_MIN_PX. pyqtgraph
    spaces ticks by the axis's length alone, and "0.05 0.10 0.15 0.2" ran together under a reply of a
    fifth of a second in a 140-px chart (a new user's try)."""

    TICK_MIN_PX = 45
    unit = ""          # after the largest number ("20 s"): a narrow panel's title leaves its own unit out

    def tickStrings(self, values, scale, spacing):
        """The numbers, the largest one that has room for it followed by the unit (a label that would
        stick out past the axis's end is not drawn: a unit on the last tick, at the end, went with it)."""
        strings = super().tickStrings(values, scale, spacing)
        low, high = self.range
        width = self.geometry().width()
        if not self.unit or not strings or high <= low or width <= 0:
            return strings
        fm = QFontMetrics(self.style.get("tickFont") or self.font())
        for i in sorted(range(len(values)), key=values.__getitem__, reverse=True):
            label = f"{strings[i]} {self.unit}"
            if (values[i] - low) / (high - low) * width + fm.horizontalAdvance(label) / 2 <= width:
                strings[i] = label
                break
        return strings

    def tickSpacing(self, minVal, maxVal, size):
        levels = super().tickSpacing(minVal, maxVal, size)
        if not levels or maxVal <= minVal:
            return levels
        spacing = levels[0][0]
        most = max(2.0, size / self.TICK_MIN_PX)
        while (maxVal - minVal) / spacing > most:           # the next of 1, 2, 5, 10, 20 …
            unit = 10.0 ** math.floor(math.log10(spacing) + 1e-9)
            step = round(spacing / unit, 6)
            spacing = (2 if step < 2 else 5 if step < 5 else 10) * unit
        return [(spacing, 0)]


def quiet_plot(fg: QColor, bg: QColor, min_width: int, min_height: int, whole: tuple[str, ...] = (),
               sparse: tuple[str, ...] = ()) -> pg.PlotWidget:
    """A small, still plot in the panel's colours: no menu, no mouse zoom, small axis text (the charts'
    and the Does it pay? curve's); the axes named in `whole` ("left", "bottom") count, and those in
    `sparse` have their numbers spaced apart (SparseAxis)."""
    axes = {name: WholeAxis(name) for name in whole} | {name: SparseAxis(name) for name in sparse}
    w = pg.PlotWidget(background=bg, axisItems=axes)
    w.setMinimumSize(min_width, min_height)
    for still in (w, w.viewport()):                  # nothing to do there by keyboard, and nothing showed the
        still.setFocusPolicy(Qt.NoFocus)             # focus: two Tab stops a plot (a new user's try)
    item = w.getPlotItem()
    item.setMenuEnabled(False)
    item.hideButtons()
    w.setMouseEnabled(x=False, y=False)
    font = QFont()
    font.setPointSize(7)
    for name in ("left", "bottom"):
        axis = item.getAxis(name)
        axis.setStyle(maxTickLevel=0, maxTextLevel=0)    # major ticks only: at 7 pt the minor ticks' numbers
        axis.setTickFont(font)                           # ran together ("9101112"), over a comb of ticks
        axis.setPen(pg.mkPen(fg))
        axis.setTextPen(pg.mkPen(fg))
    item.getAxis("left").setWidth(30)
    return w


def _small_plot(fg: QColor, bg: QColor, whole: tuple[str, ...] = (), sparse: tuple[str, ...] = ()) -> pg.PlotWidget:
    w = quiet_plot(fg, bg, 110, 95, whole, sparse)   # (two side by side fit the narrowest panel: at 150 each the
                                                    # right-hand ones were laid out past its edge and cut)
    w.getPlotItem().layout.setContentsMargins(0, 4, 4, 0)
    w.disableAutoRange()         # each redraw sets its ranges: pyqtgraph's auto range is worked out while
    return w                     # painting and then paints the plot a second time


def _titled(title: QLabel, plot: pg.PlotWidget) -> QWidget:
    """A plot under its title (a QLabel: it wraps where a plot's own title would be cut)."""
    box = QWidget()
    column = QVBoxLayout(box)
    column.setContentsMargins(0, 0, 0, 0)
    column.setSpacing(0)
    title.setWordWrap(not isinstance(title, ElidedLabel))
    title.setAlignment(Qt.AlignCenter)
    font = title.font()
    font.setPointSizeF(max(7.0, font.pointSizeF() - 1))
    title.setFont(font)
    column.addWidget(title)
    column.addWidget(plot, 1)
    return box


class LiveCharts(QWidget):
    REDRAW_MS = 1000             # at most one redraw a second while a reply streams (a redraw of four plots
                                 # costs more CPU than the rest of the panel); none while hidden
    FINISH_MS = 50               # the last redraw, this long after the reply's end

    def __init__(self, parent=None):
        super().__init__(parent)
        pal = self.palette()
        fg, bg = pal.color(QPalette.WindowText), pal.color(QPalette.Base)
        layout = QGridLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)

        self.speed_plot = _small_plot(fg, bg, sparse=("bottom",))
        self.speed_plot.getPlotItem().getAxis("bottom").unit = "s"   # (the title's "(s)" goes once it names
                                                                     # plain's rate: ticks of what? a new user's try)
        self.speed_title = ElidedLabel()           # one line: wrapped, its rate stood alone under it
        self.speed_title.setText(SPEED_TITLE, "Tokens/s")
        self.speed_title.setToolTip("Tokens per second over the last 16 tokens (at least a quarter second), "
                                    "against seconds since the reply's first round; the dashed line is plain "
                                    "decoding's rate, measured (or, until the reply ends, estimated from its "
                                    "plain steps). The panel's Speed is the whole reply's mean.")
        self.speed_curve = self.speed_plot.plot([], [], pen=pg.mkPen("#1f77b4", width=2))
        # (its rate is in the title: a label on the line sat where the curve runs, near plain's rate,
        # and hid half a reply's curve in a new user's try)
        self.plain_line = pg.InfiniteLine(angle=0, movable=False, pen=pg.mkPen(fg, width=1, style=Qt.DashLine))
        self.plain_line.setVisible(False)
        self.speed_plot.addItem(self.plain_line)

        self.position_plot = _small_plot(fg, bg, whole=("bottom",))
        self.position_title = QLabel("Kept, by draft position")
        self.position_bars = pg.BarGraphItem(x=[], height=[], width=0.7, brush=DRAFTER_COLOURS["model"])
        self.position_plot.addItem(self.position_bars)
        self.position_plot.setYRange(0, 1, padding=0.02)       # (a share)

        self.kept_plot = _small_plot(fg, bg, whole=("left", "bottom"))
        self.kept_title = QLabel(KEPT_TITLES[0])
        self.kept_title.setToolTip("Drafted tokens kept in each round, against the round's number (as the "
                                   "strip numbers them); each dot has its drafter's colour.")
        self._kept_legend: list[str] = []               # the drafters in the chart, as its title's legend names them
        self.kept_line = self.kept_plot.plot([], [], pen=pg.mkPen(QColor(fg.red(), fg.green(), fg.blue(), 60)))
        # one scatter per drafter, each of one colour: pyqtgraph then draws every point from one cached
        # symbol (per-point brushes rendered each point's symbol anew at every redraw)
        self.kept_points = {d: pg.ScatterPlotItem(size=5, pen=None, brush=pg.mkBrush(c))
                            for d, c in DRAFTER_COLOURS.items()}
        for item in self.kept_points.values():
            self.kept_plot.addItem(item)

        self.split_plot = _small_plot(fg, bg)
        self.split_title = QLabel("Time spent (s)")
        self.split_title.setToolTip("Seconds spent in the draft model's steps (draft), in the target's passes "
                                    "(target: checking drafts, and the plain steps), and on the rest of each round "
                                    "(other: the draft model reading text it had not read yet, as auto mode has it "
                                    "do before it drafts after rounds without it, Tandem's bookkeeping after each "
                                    "pass, and handing each round's tokens to the window). Judging the drafts counts "
                                    "as target time. The three add up to the reply's time after its prompt.")
        self.split_bars = pg.BarGraphItem(x=[0, 1, 2], height=[0, 0, 0], width=0.7,
                                          brushes=[c for _, c in SPLIT])
        self.split_plot.addItem(self.split_bars)
        self.split_plot.setXRange(-0.6, 2.6, padding=0)
        self.split_plot.getPlotItem().getAxis("bottom").setTicks([[(i, name) for i, (name, _) in enumerate(SPLIT)]])

        layout.addWidget(_titled(self.speed_title, self.speed_plot), 0, 0)
        layout.addWidget(_titled(self.position_title, self.position_plot), 0, 1)
        layout.addWidget(_titled(self.kept_title, self.kept_plot), 1, 0)
        layout.addWidget(_titled(self.split_title, self.split_plot), 1, 1)

        self.redraws = 0                                # how many times the plots were redrawn
        self._dirty = False                             # data came while the charts were hidden
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(self.REDRAW_MS)
        self._timer.timeout.connect(self._redraw)
        self._reset()
        self._redraw()

    # -- the API
    def begin(self, earlier_plain: float | None = None) -> None:
        """A reply starts: the charts empty and follow it. `earlier_plain`: plain decoding's rate as
        known before it (plain_rate)."""
        self._timer.stop()
        self._reset()
        self._earlier_plain = earlier_plain
        self._redraw()

    def add_round(self, r: RoundEvent) -> None:
        """A round of the running reply, with the tokens it emitted: they count as emitted at its end, on
        the engine's clock (not when they reach the window, which may be in bursts on a busy machine), as
        for a stored reply. (A llama-server that sends no per-token timings has its rounds made up at
        the reply's end: its curve appears then.)"""
        self._add(r)
        self._schedule()

    def _add(self, r: RoundEvent) -> None:
        self._rounds.append(r)
        self._clock += r.t_round_s
        self._times += [self._clock] * r.n_reply_tokens

    def finish(self, stats: GenerationStats) -> None:
        """The reply ended: the measured plain rate replaces the estimate; everything is drawn FINISH_MS
        later, on its own (the rest of the window redraws for the reply's end first: both at once held
        the UI thread for 150 ms and more on a 2-core machine)."""
        self._stats = stats
        self._timer.start(self.FINISH_MS)

    @property
    def pending(self) -> bool:
        """Data has come that the plots do not show yet (drawn on the timer, or when shown)."""
        return self._timer.isActive() or self._dirty

    def show_stored(self, rounds: Sequence[RoundEvent | Mapping] | None, stats: GenerationStats | Mapping | None,
                    earlier_plain: float | None = None) -> None:
        """A stored reply: its rounds (RoundEvents, or the history's records) and its stats, shown as
        they were live: its tokens' times are the ends of the rounds that emitted them, counted from the
        first round's start. (`earlier_plain`: a running reply's, shown again: as begin's.)"""
        self._timer.stop()
        self._reset()
        for r in rounds_from(rounds):
            self._add(r)
        self._stats = stats_from(stats)
        self._earlier_plain = earlier_plain
        self._redraw()

    def clear(self) -> None:
        self._timer.stop()
        self._reset()
        self._redraw()

    # -- what is drawn, from the rounds shown (for the window's tooltips and for tests)
    @property
    def rounds(self) -> list[RoundEvent]:
        return list(self._rounds)

    def position_acceptance(self) -> list[float]:
        """P(x_i kept | x_i drafted), i = 1..γmax, over the rounds shown."""
        drafted: list[int] = []
        kept: list[int] = []
        for r in self._rounds:
            while len(drafted) < r.gamma:
                drafted.append(0)
                kept.append(0)
            for i in range(r.gamma):
                drafted[i] += 1
                kept[i] += i < r.accepted
        return [k / d for k, d in zip(kept, drafted)]

    def time_split(self) -> tuple[float, float, float]:
        """Seconds spent drafting, verifying and on the rest of the rounds shown."""
        draft = verify = other = 0.0
        for r in self._rounds:
            draft += r.t_draft_s
            verify += r.t_verify_s
            other += max(0.0, r.t_round_s - r.t_draft_s - r.t_verify_s)
        return draft, verify, other

    def plain_rate(self) -> tuple[float | None, str]:
        """The plain-decoding reference: stats.plain_tokens_per_s once the reply ended; before that, as
        the end will price it (plain_rate_so_far) from PLAIN_ESTIMATE_MIN plain rounds ("so far"), else at the
        engine's price alone ("earlier"); else begin's `earlier_plain` (a fixed draft model's reply showed no
        comparison until its end, though slower than plain decoding all along: a new user's try); else None."""
        if self._stats is not None:
            rate = self._stats.plain_tokens_per_s
            return rate, "plain" if rate else ""
        steps = sum(not r.gamma and r.t_verify_s > 0 for r in self._rounds)
        if steps >= PLAIN_ESTIMATE_MIN and (rate := plain_rate_so_far(self._rounds)):
            return rate, PLAIN_SO_FAR
        rate = plain_rate_so_far(self._rounds, own_steps=False) if self._rounds else None   # (the engine's price)
        if rate or self._earlier_plain:
            return rate or self._earlier_plain, PLAIN_EARLIER
        return None, ""

    def shown_plain_rate(self) -> tuple[float | None, str]:
        """plain_rate() as the speed chart last drew it, while it is in sight: the chart redraws once a
        second, and the panel's live "× plain", quoting a newer estimate, said "plain ≈ 109 tok/s" under
        the chart's "plain ≈ 110" (a new user's try)."""
        return self._drawn_plain if self._drawn_plain is not None and self.isVisible() else self.plain_rate()

    # -- drawing
    def _reset(self) -> None:
        self._rounds: list[RoundEvent] = []
        self._times: list[float] = []                  # each token's time: the end of its round, in seconds
        self._clock = 0.0                               # from the first round's start (the engine's clock)
        self._stats: GenerationStats | None = None
        self._earlier_plain: float | None = None
        self._drawn_plain: tuple[float | None, str] | None = None   # plain_rate() at the last redraw

    def _schedule(self) -> None:
        if not self._timer.isActive():
            self._timer.start(self.REDRAW_MS)

    def kept_series(self) -> tuple[list[int], list[int], list[str]]:
        """What "Kept in each round" shows, in round order: round numbers (from 1, as the strip numbers
        them), kept drafts, point colours."""
        points = []
        for drafter, item in self.kept_points.items():
            x, y = item.getData()
            colour = DRAFTER_COLOURS[drafter]
            points += [(int(a), int(b), colour) for a, b in zip(x if x is not None else [], y if y is not None else [])]
        points.sort()
        return [p[0] for p in points], [p[1] for p in points], [p[2] for p in points]

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self._dirty:
            self._redraw()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit_kept_title()

    def _fit_kept_title(self) -> None:
        """"Kept in each round" and its legend (a dot of each drafter's colour and its name) on one line:
        where they do not fit, a shorter title (KEPT_TITLES). Wrapped, the legend's last name stood
        alone on a second line and pushed the plot down (a new user's try, at 1280 px)."""
        label, names = self.kept_title, [DRAFTER_NAMES[d] for d in self._kept_legend]
        head = next((h for h in KEPT_TITLES if label.fontMetrics().horizontalAdvance(" ●".join([h, *names]))
                     <= label.contentsRect().width() - 2), KEPT_TITLES[-1])
        label.setText(" ".join([head, *(f'<span style="color:{DRAFTER_COLOURS[d]}">●</span>{n}'
                                        for d, n in zip(self._kept_legend, names))]))

    def _redraw(self) -> None:
        if self.window().isVisible() and not self.isVisible():     # in a hidden tab or a folded panel
            self._dirty = True
            return
        self._dirty = False
        self.redraws += 1
        xs, ys = rolling_rate(self._times, 0.0, end=self._clock)
        self.speed_curve.setData(xs, ys)
        rate, label = self._drawn_plain = self.plain_rate()
        self.plain_line.setVisible(rate is not None)
        label = PLAIN_SO_FAR if label == PLAIN_EARLIER else label    # (the title has one line: the panel's row says when)
        if rate is None:
            self.speed_title.setText(SPEED_TITLE, "Tokens/s")
        else:                                      # (the seconds' unit as long as it fits)
            finer = self._stats is not None and rates_finer(self._stats)   # (the digits the panel quotes it at)
            plain = f"{label} {rate_number(rate, finer)}"      # (the number whole or not at all: cut, "dashed: plain
            self.speed_title.setText(f"{SPEED_TITLE}; dashed: {plain}", f"Tokens/s; dashed: {plain}",  # 1…" read
                                     f"Tok/s; dashed: {plain}", f"Tok/s; {plain}", "Tok/s")   # as 1 tok/s)
        if rate is not None:
            self.plain_line.setValue(rate)
        self.speed_plot.setXRange(0, max(xs, default=0) or 1, padding=0.02)
        self.speed_plot.setYRange(0, _top(ys + ([1.1 * rate] if rate else [])), padding=0)   # (the line in view)

        acc = self.position_acceptance()
        self.position_bars.setOpts(x=list(range(1, len(acc) + 1)), height=acc)
        self.position_plot.setXRange(0.4, max(len(acc), 1) + 0.6, padding=0)

        rounds = self._rounds
        for drafter, item in self.kept_points.items():
            mine = [r for r in rounds if (r.drafter if r.drafter in DRAFTER_COLOURS else "none") == drafter]
            item.setData(x=[r.index + 1 for r in mine], y=[r.accepted for r in mine])   # #1, #2, ... as in the strip
        self._kept_legend = [d for d in DRAFTER_COLOURS if any(r.drafter == d for r in rounds)]
        self._fit_kept_title()
        self.kept_line.setData([r.index + 1 for r in rounds], [r.accepted for r in rounds])
        self.kept_plot.setXRange(0.5, max((r.index + 1 for r in rounds), default=1) + 0.5, padding=0)
        self.kept_plot.setYRange(0, _top([r.accepted for r in rounds]), padding=0)

        split = list(self.time_split())
        self.split_bars.setOpts(height=split)
        self.split_plot.setYRange(0, _top(split), padding=0)       # (from 0 s before any reply)


def _top(values: Sequence[float]) -> float:
    """The top of a y range from 0 showing values with a little room above them (1 for none; values
    that are not finite numbers are left out)."""
    return 1.08 * max((v for v in values if math.isfinite(v)), default=0) or 1.0
