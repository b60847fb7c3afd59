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


def test_a_folded_sentence_shows_its_brief_form_and_unfolds_on_its_link(qtbot):
    from PySide6.QtCore import Qt

    label = SentenceLabel()
    qtbot.addWidget(label)
    label.setText("All of it: 1 < 2 at 13.3 tok/s, and more besides.", "1 < 2 at 13.3 tok/s.")
    assert label.shown() == "1 < 2 at 13.3 tok/s. more ▸" and label.text().startswith("All of it")
    assert "1 &lt; 2" in QLabel.text(label) and label.focusPolicy() == Qt.TabFocus     # (a Tab stop: its link;
    # a click on it leaves the focus where it was, in the message box)
    label.linkActivated.emit("more")
    assert label.shown() == "All of it: 1 < 2 at 13.3 tok/s, and more besides. less ▴"
    label.setText("Another: whole.", "Another.")                 # unfolded stays unfolded
    assert label.shown() == "Another: whole. less ▴"
    label.linkActivated.emit("less")
    assert label.shown() == "Another. more ▸"
    label.setText("Short.", "Short.")                            # nothing to fold: plain text, no Tab stop
    assert label.shown() == "Short." and QLabel.text(label) == "Short." and not label.focusPolicy() & Qt.TabFocus
