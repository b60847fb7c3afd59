"""Help ▸ Keyboard shortcuts and Help ▸ Reading the speculation panel: what a new user found nowhere
in the window (the Help menu held only the system report; Ctrl+F, F2, Esc and Ctrl+L were in no menu,
and nothing said what γ, α or a bonus token is). The shortcuts are read from the window's own actions,
so the list cannot drift from what the keys do."""
from __future__ import annotations

import html

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QTextBrowser, QVBoxLayout

TYPING = (("Enter", "Send the message (while a reply runs, it waits and goes when the reply ends)"),
          ("Shift+Enter", "A new line in the message"))
SAID_MORE = {"Stop": "Stop the reply or compare running; with none, end a search, or else an edit"}

PANEL_HELP = """
<p>Each <b>round</b>, a drafter guesses up to <b>γ</b> tokens and the target model checks them all in one
pass. The draft model guesses by writing ahead; <b>prompt lookup</b> copies what followed an earlier
occurrence of the text just written; <b>Auto</b> chooses between them, or plain decoding, round by
round, from what it measures on this machine.</p>
<p>The round strip shows every round, in colours the legend above it repeats:</p>
<ul>
<li><b>kept</b> (green): a guessed token the target agreed with; it cost no pass of its own.</li>
<li><b>rejected</b> (red, struck through): the first guess the target did not keep.</li>
<li><b>discarded</b> (grey): guesses after a rejected one; they are dropped without being judged.</li>
<li><b>correction</b> (orange): the target's own token in place of the rejected one.</li>
<li><b>bonus</b> (blue): when every guess was kept, the same pass yields one more token.</li>
<li><b>plain</b>: a round with no guess, one token from one target pass, as without speculation.</li>
<li><b>end</b> (outlined): where the reply ended, and why: the model's end token (eos), Max tokens, a stop string, a full context, or Stop.</li>
</ul>
<p>A row's name says what drafted it and how many tokens: "#12 lookup γ5" is round 12, five tokens
copied. That is what the round drafted, which can be fewer than the γ set: a draft stops at the
reply's end, at Max tokens, where a copy's earlier text runs out, or (draft model) where its own
confidence falls below Advanced ▸ p-min; in Auto it is the γ auto chose for that round.
Hover a guess for q (the draft's probability of it), p (the target's) and min(1, p/q), the
chance it is kept when sampling. From the keyboard, Tab to the strip, move between rounds with the
arrow keys, and press Enter for the round's guesses, each with its q and p.</p>
<p><b>Acceptance α</b> is the chance a guess is kept when those before it were. A round of γ guesses
then gives (1 − α<sup>γ+1</sup>) / (1 − α) tokens for one target pass. Whether that is faster
depends on what the pass costs: checking γ + 1 tokens costs more than one single-token pass, a little
more on a GPU and several times more on a CPU, and each draft step costs a share of a target pass
(<b>Draft step cost</b>, the papers' c).</p>
<p>The sentence under the numbers says whether the reply beat plain decoding and why; its
"more ▸" link shows the rest: what was kept, and what auto passed over.</p>
<p>The numbers above the sentence: <b>Speed</b> is the reply's tokens per second after its prompt was
read; <b>Tokens</b> is its length ("+ end": and its end token, which is not text) and in how many
rounds; <b>First token</b>, how long its first token took; <b>Drafts kept</b>, <b>Kept per drafted
round</b> (plain rounds left out) and <b>Draft / target time</b> (choosing and making drafts / the
target's passes) say where the time went. Hover a number's name or its value for what it means.</p>
<p>The <b>Charts</b> tab: tokens per second over the reply (the dashed line is plain decoding's rate);
how often each draft position was kept; what each round kept; and the time spent drafting, in the
target's passes, and on the rest ("other": the draft model catching up on text it had not read, and
Tandem's own bookkeeping). Hover a chart's title for more.</p>
<p><b>vs plain (measured)</b> is this reply's speed over plain decoding's on this machine, timed (a
single-token pass per token, timed on the reply's plain steps; a pass slows as the context grows, so
where the reply drafted, a pass is priced as slow as the checks around it show);
<b>Predicted (cost model)</b> is what the measured costs and α predict. <b>Does it pay?</b> draws the
prediction for every γ. Below 1.0× speculation is slower here, and the panel says so: with a fixed
γ, try Auto, a shorter γ, or Speculate off; in Auto, what it tried while it learnt this text cost
more than it won (it drafts less once it has), and Speculate off is plain decoding.</p>
<p>Other programs busy on the CPUs slow every pass: llama.cpp's threads wait for each other at every
step. With Settings ▸ Threads at automatic, a reply runs on fewer threads while they are, and the
panel's sentence ends by saying so; with a number set there (the model bar's line names it), where
other programs kept the CPUs busy, it says what automatic would have run.</p>
"""


def shortcut_rows(actions: list[QAction]) -> list[tuple[str, str]]:
    """(keys, what they do) for every action with a shortcut, the typing keys first, once each."""
    rows, seen = list(TYPING), set()
    for action in actions:
        keys = action.shortcut().toString(QKeySequence.NativeText)
        name = action.text().replace("&", "").rstrip("…")
        if keys and (keys, name) not in seen:
            seen.add((keys, name))
            rows.append((keys, SAID_MORE.get(name, name)))
    return rows


class HelpDialog(QDialog):
    def __init__(self, title: str, body_html: str, parent=None):
        super().__init__(parent)
        self.setWindowTitle(title)
        self.resize(560, 520)
        layout = QVBoxLayout(self)
        self.text = QTextBrowser()
        self.text.setObjectName("helpText")
        self.text.setOpenExternalLinks(True)
        self.text.setHtml(body_html)
        layout.addWidget(self.text)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        layout.addWidget(buttons)


def shortcuts_html(actions: list[QAction]) -> str:
    rows = "".join(f"<tr><td style='padding-right: 16px'><b>{html.escape(k)}</b></td><td>{html.escape(w)}</td></tr>"
                   for k, w in shortcut_rows(actions))
    return f"<table>{rows}</table>"
