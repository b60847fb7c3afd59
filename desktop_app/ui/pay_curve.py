""""Does it pay?": the predicted speed-up over plain decoding against γ, from a reply's measured α, draft
step and verify costs per batch size (engine.costs.speedup_curve: the cost model auto mode uses), with
the γ in use, the best γ and the reply's measured speed-up marked, and one sentence that says the same.
The curve drafts in every round; a reply that did not (auto mode, or copies only where there was a
match) also has its own prediction marked, beside its measured speed-up, since the curve is not its.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QSize, Qt
from PySide6.QtGui import QFont, QPalette
from PySide6.QtWidgets import QVBoxLayout, QWidget

from desktop_app.counts import count
from desktop_app.engine.costs import WIN_MARGIN, best_gamma, speedup_curve
from desktop_app.engine.events import GenerationStats
from desktop_app.engine.explain import check_passes, reply_checks_text
from desktop_app.engine.number_text import alpha_text
from desktop_app.engine.settings import DRAFT_MAX_LIMIT
from desktop_app.ui.charts import label_backing, quiet_plot, stats_from
from desktop_app.ui.sentence_label import SentenceLabel

GAMMA_MAX = 16
THIN_EVIDENCE = 40           # fewer drafted tokens than this and α is a rough guess (at α 0.5, ±0.15 at 95 %)
HEADROOM = 1.6               # the y axis runs to this times the curve's top: the band above holds the labels
HEADROOM_MAX = 3.0           # ... or more in a short plot, up to this (_fit_height)
LABEL_INSET = 4              # pixels between the y axis and the reply's lines at the top left
_WIDGET_SHOW = object()      # show() without a reply: the widget's own show


class PayCurve(QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        pal = self.palette()
        fg, bg = pal.color(QPalette.WindowText), pal.color(QPalette.Base)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        self.plot = quiet_plot(fg, bg, 200, 140, whole=("bottom",))
        item = self.plot.getPlotItem()
        item.setTitle('<span style="font-size:8pt">Does it pay? Predicted speed-up against γ</span>', color=fg)
        item.setLabel("bottom", "γ (tokens drafted per round)", **{"font-size": "7pt"})
        self.curve = self.plot.plot([], [], pen=pg.mkPen("#1f77b4", width=2), symbol="o", symbolSize=4,
                                    symbolBrush="#1f77b4", symbolPen=None)
        self.plain_line = pg.InfiniteLine(pos=1.0, angle=0, movable=False,
                                          pen=pg.mkPen(fg, width=1, style=Qt.DashLine), label="plain 1×",
                                          labelOpts={"position": 0.98, "color": fg, "anchors": [(1, 0), (1, 0)]})
        self.plain_line.label.setFont(QFont(self.font().family(), 7))     # (as the other labels)
        self.plot.addItem(self.plain_line)
        self.current_line = pg.InfiniteLine(angle=90, movable=False, pen=pg.mkPen("#8c8c8c", width=1, style=Qt.DotLine))
        self.plot.addItem(self.current_line)
        self.best_point = pg.ScatterPlotItem(size=12, symbol="star", brush="#2ca02c", pen=pg.mkPen(fg))
        self.plot.addItem(self.best_point)
        self.measured_point = pg.ScatterPlotItem(size=9, symbol="d", brush="#d62728", pen=pg.mkPen(fg))
        self.plot.addItem(self.measured_point)
        self.own_point = pg.ScatterPlotItem(size=15, symbol="d", brush=None, pen=pg.mkPen("#d62728", width=1.5))
        # (larger than the measured ◆: where the two are equal, the ◆ shows inside the ◇)
        self.plot.addItem(self.own_point)
        backing = label_backing(bg)
        self.reply_label = pg.TextItem("", color=fg, anchor=(0, 0), fill=pg.mkBrush(backing))   # the γ used and
        # what it gave, over the γ-in-use line where that runs under it
        # right of the star and above it: the curve never rises above its best point
        self.best_label = pg.TextItem("best", color="#2ca02c", anchor=(-0.25, 1.0), fill=pg.mkBrush(backing))
        for label in (self.best_label, self.reply_label):
            label.setFont(QFont(self.font().family(), 7))
            self.plot.addItem(label)
        layout.addWidget(self.plot)
        self.sentence = SentenceLabel()
        self.sentence.setObjectName("pay_sentence")
        layout.addWidget(self.sentence)
        self.gammas: list[int] = []
        self.speedups: list[float | None] = []
        self.best_gamma = 0
        self.clear()
        self.plot.getPlotItem().getViewBox().sigResized.connect(self._fit_height)

    def minimumSizeHint(self) -> QSize:
        """The plot at its least and the sentence whole under it, as it wraps at this width: a tab does not
        ask a wrapped label's height for its width, and in a short panel a long sentence was laid over the
        plot's γ axis (a new user's try, 1000×700)."""
        hint = super().minimumSizeHint()
        width = max(self.width(), hint.width())
        return QSize(hint.width(), self.plot.minimumHeight() + self.layout().spacing()
                     + max(0, self.sentence.heightForWidth(width)))

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self.updateGeometry()                # (the sentence wraps anew: its height, and so the least)

    def clear(self) -> None:
        self.gammas, self.speedups, self.best_gamma = [], [], 0
        self._top, self._drawn = 1.0, False
        self.plain_line.label.setVisible(True)
        self.curve.setData([], [])
        self.current_line.setVisible(False)
        self.reply_label.setVisible(False)
        self.best_point.setData([], [])
        self.measured_point.setData([], [])
        self.own_point.setData([], [])
        self.best_label.setVisible(False)
        self.sentence.setText("")

    def waiting(self) -> None:
        """A reply is being written: nothing to draw yet, and the tab says when there will be (it stood
        empty: a user's try)."""
        self.clear()
        self.sentence.setText("The curve is drawn when the reply ends, from its α and the costs measured on "
                              "this machine.")

    def show(self, stats: GenerationStats | Mapping | None = _WIDGET_SHOW, current_gamma: int = 0) -> None:
        """Draw the curve for this reply's measurements (a GenerationStats, or its stored JSON);
        current_gamma is the γ this reply used (its mean draft length, rounded: in auto mode it is not
        a setting). Called with no arguments, QWidget.show."""
        if stats is _WIDGET_SHOW:
            super().show()
            return
        self.clear()
        s = stats_from(stats)
        if s is None:
            return
        if not s.n_tokens:
            self.sentence.setText("Nothing was written, so there is nothing to judge from.")
            return
        if not s.n_drafted or s.alpha is None:
            self.sentence.setText("This reply drafted nothing (plain decoding), so there is no α to judge "
                                  "from: no γ can be predicted.")
            return
        alpha, step = s.alpha, s.t_draft_step_s or 0.0
        plain = s.plain_pass_s                # (the pass c is a share of, and "× plain" is over)
        self.gammas = list(range(1, max(GAMMA_MAX, current_gamma) + 1))
        self.speedups = speedup_curve(alpha, step, s.verify_s_by_batch, plain, self.gammas)
        known = [(g, v) for g, v in zip(self.gammas, self.speedups) if v is not None]
        if not known:
            self.sentence.setText(f"At α {alpha_text(alpha)}: these stats hold no measured verify costs (replies stored "
                                  "by older versions lack them), so no speed-up can be predicted.")
            return
        self.curve.setData([g for g, _ in known], [v for _, v in known])
        self.best_gamma = best = best_gamma(self.gammas, self.speedups)
        predicted = dict(known)
        if best:
            self.best_point.setData([best], [predicted[best]])
            self.best_label.setPos(best, predicted[best])
            self.best_label.setAnchor((-0.25, 1.0) if best <= 0.6 * self.gammas[-1] else (1.25, 1.0))
            self.best_label.setVisible(True)
        if current_gamma > 0:
            self.current_line.setValue(current_gamma)
            self.current_line.setVisible(True)
        label = (f"this reply: γ ≈ {s.mean_drafted:.1f}" if s.mean_drafted else f"this reply: γ {current_gamma}")
        measured = s.measured_speedup
        own = None
        if measured is not None and s.mean_drafted:
            self.measured_point.setData([s.mean_drafted], [measured])
            if s.n_plain_rounds and s.predicted_speedup_measured is not None:
                own = s.predicted_speedup_measured    # its rounds as they ran, plain ones included: not the curve's
                self.own_point.setData([s.mean_drafted], [own])
            label += (f'<br><span style="color:#d62728">◆ measured {measured:.2f}×'
                      + (f" (◇ predicted {own:.2f}×)" if own is not None else "") + "</span>")
        self._top = max([v for _, v in known] + [measured or 0.0, own or 0.0, 1.0])
        self._drawn = True
        if current_gamma > 0:
            self.reply_label.setHtml(f'<span style="font-size:7pt">{label}</span>')
            self.reply_label.setVisible(True)
        self._fit_height()
        self.plot.setXRange(0.5, self.gammas[-1] + 0.5, padding=0)
        self.sentence.setText(self._sentence(s, current_gamma, best, predicted, measured))

    def _fit_height(self) -> None:
        """The y axis runs to HEADROOM times the curve's top, or higher where the plot is short: the band
        above the curve holds the reply's two lines at the left edge (no part of the curve reaches
        there: the most room) and "best" above the star, and in a short panel the two met (a user's
        try). Called again whenever the plot is resized."""
        if not self._drawn:
            return
        view = self.plot.getPlotItem().getViewBox()
        height = view.height()
        band = (self.reply_label.boundingRect().height() if self.reply_label.isVisible() else 0.0) \
            + (self.best_label.boundingRect().height() if self.best_label.isVisible() else 0.0) + 4.0
        headroom = max(HEADROOM, min(HEADROOM_MAX, height / (height - band))) if height > band else HEADROOM_MAX
        y_max = self._top * headroom
        self.plot.setYRange(0, y_max, padding=0)
        lo, hi = self.gammas[0] - 0.5, self.gammas[-1] + 0.5              # the x range shown
        inset = LABEL_INSET * (hi - lo) / view.width() if view.width() > 0 else 0.0   # (before its first layout: none)
        self.reply_label.setPos(lo + inset, y_max)                      # (it touched the axis)
        self._place_plain_label(y_max, height, view.width())

    def _place_plain_label(self, y_max: float, height: float, width: float) -> None:
        """"plain 1×" goes at an end of its line (y = 1), above or below it, where the most room is left
        between the line and whatever lies under the label's width (the curve, the reply's markers,
        the plot's edge, the reply's lines at the top left): it sat on a curve that fell below 1 at
        the right, under the line (a user's try). Where it fits nowhere it is left out: the dashed
        line and the axis's 1 still say it. `height`, `width`: the plot's, in pixels."""
        label = self.plain_line.label
        need = label.boundingRect().height()
        px = height / y_max                                       # pixels per unit of speed-up
        top_band = self.reply_label.boundingRect().height() if self.reply_label.isVisible() else 0.0
        lo, hi = 0.5, self.gammas[-1] + 0.5                       # the x range shown
        span = (label.boundingRect().width() + 4.0) * (hi - lo) / max(width, 1.0)
        xs, ys = (np.asarray(a, dtype=float) for a in self.curve.getData())
        marks = [(float(x), float(y)) for item in (self.measured_point, self.own_point)
                 for x, y in zip(*item.getData())]

        def under(at_right: bool) -> list[float]:                 # speed-ups under the label
            a, b = (hi - span - 0.02 * (hi - lo), hi) if at_right else (lo, lo + span + 0.02 * (hi - lo))
            grid = np.linspace(max(a, xs[0]), min(b, xs[-1]), 12)
            return [float(v) for v in np.interp(grid, xs, ys)] + [y for x, y in marks if a <= x <= b]

        def room(at_right: bool, above: bool) -> float:
            vs = under(at_right)
            if above:
                edge = (y_max - 1.0) * px - (0.0 if at_right else top_band)
                if max(vs) <= 1.0:
                    return edge
                return min(edge, (min(vs) - 1.0) * px) if min(vs) > 1.0 else 0.0
            if min(vs) >= 1.0:
                return 1.0 * px
            return min(1.0 * px, (1.0 - max(vs)) * px) if max(vs) < 1.0 else 0.0
        rooms = {(r, a): room(r, a) for r in (True, False) for a in (True, False)}
        at_right, above = max(rooms, key=lambda ra: (rooms[ra], ra))
        if rooms[at_right, above] < need:
            label.setVisible(False)
            return
        anchor = (1.0 if at_right else 0.0, 1.0 if above else 0.0)
        label.anchors = [anchor, anchor]
        label.setVisible(True)
        label.setPosition(0.98 if at_right else 0.02)

    @staticmethod
    def _sentence(s: GenerationStats, current: int, best: int, predicted: dict[int, float],
                  measured: float | None) -> str:
        measured_text = f"measured {measured:.2f}×" if measured is not None else ""
        alpha = f"α {alpha_text(s.alpha)}"
        if s.n_drafted < THIN_EVIDENCE:          # (a user's try: "γ 16 is best" from 8 drafted tokens, all kept)
            alpha += f" (from only {count(s.n_drafted, 'drafted token')}: a rough guess)"
        if best:
            copies = " for copies of earlier text" if s.c == 0.0 else ""   # (c 0: copies only; "γ 7 is best"
            # of a lookup-only reply named no drafter: a new user's try)
            edge = best == max(predicted) and best < DRAFT_MAX_LIMIT   # (still rising where the chart ends: "γ 16
            lead, note = (f"γ {best} or longer", f"the chart ends at γ {best}; ") if edge else (f"γ {best}", "")  # is
            text = f"At {alpha} on this machine, {lead} is best{copies} ({note}predicted {predicted[best]:.2f}×"  # best"
            # beside a slider to 32: a new user's try)
            text += " with every round drafting)" if s.n_plain_rounds else ")"
            used = f"; this reply drafted {s.mean_drafted or current:.1f} tokens a round"
            if s.n_plain_rounds and s.predicted_speedup_measured is not None:
                # the curve drafts in every round; this reply (auto mode, or copies only where there
                # was a match) did not, so its own prediction, the panel's, is the one to set beside it
                drafting = s.n_rounds - s.n_plain_rounds
                text += (f"; this reply drafted in {drafting} of its {s.n_rounds} rounds, "
                         f"{s.mean_drafted or current:.1f} tokens on average (its rounds as they ran: "
                         f"predicted {s.predicted_speedup_measured:.2f}×")
                text += f", {measured_text})" if measured_text else ")"
                text += _above(s, predicted)
            elif current == best:
                text += used + (f" ({measured_text})" if measured_text else "")
            elif current in predicted:
                text += used + f" (γ {current}: predicted {predicted[current]:.2f}×"
                text += f", {measured_text})" if measured_text else ")"
            elif measured_text:
                text += f"; this reply: {measured_text}"
            return text + "."
        g = current if current in predicted else max(1, round(s.mean_drafted or 1))
        passes = check_passes(s, g + 1)
        text = f"At {alpha}, no γ is predicted to beat plain decoding here"
        if WIN_MARGIN > 1 and max(predicted.values()) > 1.0:
            text += f" by the {100 * (WIN_MARGIN - 1):.0f} % auto mode asks for"
        if passes:
            text += (f": by this machine's timings (at load, refined by every round) a {g + 1}-token check "
                     f"costs {passes:.1f} single passes")
            own = reply_checks_text(s)      # (the panel's own figure, set beside it: "3.3×" there and "3.4"
            if own:                         # here, from two sources, read as a contradiction: a new user's try)
                text += f"; {own}"
            if s.c:
                text += f", and {'' if own else 'in this reply '}each drafted token cost {s.c:.2f} of one"
        if s.n_plain_rounds and s.predicted_speedup_measured is not None:     # (as above: not the curve's)
            own = (f"this reply drafted in {s.n_rounds - s.n_plain_rounds} of its {s.n_rounds} rounds: "
                   f"predicted {s.predicted_speedup_measured:.2f}×")
            return text + f" ({own}" + (f", {measured_text})" if measured_text else ")") + _above(s, predicted) + "."
        return text + (f" (this reply: {measured_text})." if measured_text else ".")


ABOVE_THE_CURVE = (": above the curve, which has every round draft the same γ and keep each token at one average α; "
                   "this reply's rounds were not alike (long runs kept in some, little or nothing drafted in "
                   "others), and an average cannot show that")   # ("prices every round alike, one γ at the
                                                                # reply's α" was jargon: a new user's try)


def _above(s: GenerationStats, predicted: dict[int, float]) -> str:
    """Why a reply's own prediction is above the curve's best (or above plain where no γ beats it), where
    it is as shown: a "best" below the reply read as a contradiction (a user's try)."""
    if round(s.predicted_speedup_measured, 2) <= round(max(predicted.values()), 2):
        return ""
    return ABOVE_THE_CURVE
