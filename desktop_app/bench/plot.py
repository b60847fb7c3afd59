"""The speed-up against draft length, measured beside the formula's prediction, drawn with Qt to PNG
(offscreen: no window, no extra plotting library)."""
from __future__ import annotations

import os

from desktop_app.bench.report import Row

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"]


def _app():
    from PySide6.QtGui import QGuiApplication

    if QGuiApplication.instance() is None:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        return QGuiApplication([])
    return QGuiApplication.instance()


def plot_speedups(rows: list[Row], path: str, title: str = "") -> None:
    """One line per prompt and drafter: measured speed-up (solid, with min–max bars) and the
    prediction from measured α and costs (dashed; a dash at each γ, so a single γ shows it too),
    against the draft length γ; auto, which chooses γ itself, as a dash-dotted level across the plot in
    its prompt's colour. (With one γ the predictions the legend named were not drawn, and auto not at
    all: a new user's try.)"""
    _app()
    from PySide6.QtCore import QPointF, QRectF, Qt
    from PySide6.QtGui import QColor, QFont, QImage, QPainter, QPen

    fixed = [r for r in rows if r.drafter not in ("none", "server") and not r.auto and r.speedup is not None]
    autos = [r for r in rows if r.drafter not in ("none", "server") and r.auto and r.speedup is not None]
    width, height = 1100, 650
    left, right, top, bottom = 80, 260, 50, 60
    image = QImage(width, height, QImage.Format_ARGB32)
    image.fill(QColor("white"))
    p = QPainter(image)
    p.setRenderHint(QPainter.Antialiasing)
    p.setFont(QFont("Sans", 10))
    gammas = sorted({r.draft_max for r in fixed}) or [1]
    values = [v for r in fixed for v in (r.speedup_min, r.speedup_max, r.predicted_speedup_measured) if v]
    values += [r.speedup for r in autos]
    y_max = max([1.5, *values]) * 1.1
    y_min = 0.0
    x_min, x_max = min(gammas) - 0.5, max(gammas) + 0.5

    def xy(g, v):
        x = left + (g - x_min) / (x_max - x_min) * (width - left - right)
        y = height - bottom - (v - y_min) / (y_max - y_min) * (height - top - bottom)
        return QPointF(x, y)

    p.setPen(QPen(QColor("#444"), 1))
    p.drawRect(QRectF(left, top, width - left - right, height - top - bottom))
    for g in gammas:
        pt = xy(g, y_min)
        p.drawText(QRectF(pt.x() - 20, pt.y() + 5, 40, 20), Qt.AlignCenter, str(g))
    step = 0.25 if y_max < 3 else 0.5
    v = 0.0
    while v <= y_max:
        pt = xy(x_min, v)
        p.setPen(QPen(QColor("#ddd"), 1))
        p.drawLine(QPointF(left, pt.y()), QPointF(width - right, pt.y()))
        p.setPen(QPen(QColor("#444"), 1))
        p.drawText(QRectF(left - 50, pt.y() - 10, 44, 20), Qt.AlignRight | Qt.AlignVCenter, f"{v:.2f}")
        v += step
    p.setPen(QPen(QColor("black"), 2, Qt.DotLine))                     # break-even with plain decoding
    p.drawLine(xy(x_min, 1.0), xy(x_max, 1.0))
    p.setPen(QColor("black"))
    p.drawText(QRectF(0, 10, width, 30), Qt.AlignCenter, title or "Speed-up over plain decoding")
    p.drawText(QRectF(left, height - 30, width - left - right, 20), Qt.AlignCenter, "draft length γ")
    p.save()
    p.translate(20, height / 2)
    p.rotate(-90)
    p.drawText(QRectF(-150, -10, 300, 20), Qt.AlignCenter, "tokens/s ÷ plain tokens/s")
    p.restore()

    def legend(row: int, pen, text: str, gap: int = 0) -> None:
        ly = top + 10 + 22 * row + gap
        p.setPen(pen)
        p.drawLine(QPointF(width - right + 15, ly), QPointF(width - right + 40, ly))
        p.setPen(QColor("black"))
        p.drawText(QPointF(width - right + 46, ly + 4), text)

    series = sorted({(r.prompt, r.drafter) for r in fixed})
    colours: dict[str, QColor] = {}          # a prompt's auto level in the colour of its first line, or its own
    for i, (prompt, _) in enumerate(series):
        colours.setdefault(prompt, QColor(COLOURS[i % len(COLOURS)]))
    for i, prompt in enumerate(sorted({r.prompt for r in autos} - set(colours)), start=len(series)):
        colours[prompt] = QColor(COLOURS[i % len(COLOURS)])
    for i, (prompt, drafter) in enumerate(series):
        colour = QColor(COLOURS[i % len(COLOURS)])
        pts = sorted((r for r in fixed if r.prompt == prompt and r.drafter == drafter), key=lambda r: r.draft_max)
        p.setPen(QPen(colour, 2))
        for a, b in zip(pts, pts[1:]):
            p.drawLine(xy(a.draft_max, a.speedup), xy(b.draft_max, b.speedup))
        for r in pts:
            c = xy(r.draft_max, r.speedup)
            p.drawEllipse(c, 4, 4)
            if r.speedup_min is not None and r.speedup_max is not None:
                p.drawLine(xy(r.draft_max, r.speedup_min), xy(r.draft_max, r.speedup_max))
        predicted = [r for r in pts if r.predicted_speedup_measured is not None]
        p.setPen(QPen(colour, 1.5, Qt.DashLine))
        for a, b in zip(predicted, predicted[1:]):
            p.drawLine(xy(a.draft_max, a.predicted_speedup_measured), xy(b.draft_max, b.predicted_speedup_measured))
        for r in predicted:
            c = xy(r.draft_max, r.predicted_speedup_measured)
            p.drawLine(QPointF(c.x() - 14, c.y()), QPointF(c.x() + 14, c.y()))
        legend(i, QPen(colour, 2), f"{prompt} · {drafter}")
    n = len(series)
    for k, r in enumerate(sorted(autos, key=lambda r: (r.prompt, r.setting))):
        pen = QPen(colours[r.prompt], 2, Qt.DashDotLine)
        p.setPen(pen)
        p.drawLine(xy(x_min, r.speedup), xy(x_max, r.speedup))
        legend(n + k, pen, f"{r.prompt} · {r.setting}")
    if any(r.predicted_speedup_measured is not None for r in fixed):
        legend(n + len(autos), QPen(QColor("#444"), 1.5, Qt.DashLine), "predicted (measured α, c, verify)", gap=10)
    p.end()
    if not image.save(path):
        raise OSError(f"Qt could not save a {os.path.splitext(path)[1] or 'suffix-less'} image there")
