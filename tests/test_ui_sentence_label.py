"""Sentences with rates in them wrap between words, never inside "tok/s" (ui/sentence_label.py)."""
from __future__ import annotations

from PySide6.QtGui import QTextLayout
from PySide6.QtWidgets import QLabel

from desktop_app.ui.banner import Banner
from desktop_app.ui.compare_dialog import CompareDialog
from desktop_app.ui.pay_curve import PayCurve
from desktop_app.ui.sentence_label import SentenceLabel

SENTENCE = "auto ran at 13.3 tok/s against plain decoding's 11.0 tok/s: 1.21× plain"


def lines_at(label: QLabel, width: int) -> list[str]:
    """The lines Qt breaks the label's shown text into at `width` pixels."""
    shown = QLabel.text(label)                      # (what Qt draws, not SentenceLabel.text())
    layout = QTextLayout(shown, label.font())
    layout.beginLayout()
    lines = []
    while (line := layout.createLine()).isValid():
        line.setLineWidth(width)
        lines.append(shown[line.textStart():line.textStart() + line.textLength()])
    layout.endLayout()
    return lines


def test_a_rate_s_unit_stays_on_one_line(qtbot):
    plain = QLabel(SENTENCE)                        # Qt's own breaks: after the slash, at some widths
    qtbot.addWidget(plain)
    assert any(line.endswith("tok/") for w in range(40, 400) for line in lines_at(plain, w))

    label = SentenceLabel(SENTENCE)
    qtbot.addWidget(label)
    assert label.text() == SENTENCE and label.wordWrap()
    for width in range(40, 400):
        lines = lines_at(label, width)
        assert not any(line.rstrip().rstrip("\u2060").endswith("tok/") for line in lines), (width, lines)
        assert "".join(lines).replace("\u2060", "") == SENTENCE
    # the widgets whose sentences hold rates use it: the panel's verdict, Does it pay?, Compare, banners
    banner, pay, compare = Banner(), PayCurve(), CompareDialog()
    for widget in (banner, pay, compare):
        qtbot.addWidget(widget)
    assert isinstance(banner.label, SentenceLabel) and isinstance(pay.sentence, SentenceLabel)
    assert isinstance(compare.status, SentenceLabel) and isinstance(compare.speedup, SentenceLabel)
