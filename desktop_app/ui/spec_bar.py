"""The speculation bar: always in view above the chat, it turns speculation on and off, picks the
drafter (draft model, prompt lookup or auto) and the draft length γ, and says which mode is on.

A change applies from the next round, also in the middle of a reply: the bar emits `changed` with its
settings (the `settings["generation"]` keys it owns) and the window passes `spec(has_draft_model)` to
the worker. In Auto the engine chooses γ (and, with a draft model, model or lookup) each round; the
window gives the bar each RoundEvent (`show_round`) so that it shows what auto is choosing."""
from __future__ import annotations

from PySide6.QtCore import QPoint, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (QButtonGroup, QDoubleSpinBox, QFrame, QHBoxLayout, QLabel, QSlider, QToolTip,
                               QSpinBox, QToolButton, QVBoxLayout, QWidget)

from desktop_app.engine.auto_policy import AUTO_GAMMA_MAX
from desktop_app.engine.events import RoundEvent
from desktop_app.engine.settings import DRAFT_MAX_LIMIT, SpecSettings
from desktop_app.ui.elided import ElidedLabel

P_MIN_TIP = "Stop drafting when the draft model's top probability falls below this"
P_MIN_IDLE_TIP = P_MIN_TIP + " (no draft model drafts here: copies of earlier text have no probability)"
SPEC_KEYS = ("speculation", "drafter", "draft_max", "draft_min", "draft_p_min", "auto")   # in settings["generation"]
CHOICES = [("model", "Draft model"), ("lookup", "Prompt lookup"), ("auto", "Auto")]
DRAFTER_WORDS = {"model": "draft model", "lookup": "prompt lookup"}
TOGGLE_KEYS, UP_KEYS, DOWN_KEYS = "Ctrl+T", "Ctrl+]", "Ctrl+["
P_MIN_MAX = 0.99                 # the settings file's bound (a probability below 1)
TIP_DELAY_MS = 150               # a note from a key or a menu item shows this much later (the menu gone)

NO_DRAFT_TIP = ("No draft model is loaded: choose one in the Draft box of the model bar and load the pair "
                "to draft with it. Prompt lookup and Auto work without one.")


def auto_text(r: RoundEvent) -> str:
    """What auto chose in round r: "auto: γ 3 (lookup)", or "auto: plain step" when it drafted nothing."""
    return f"auto: γ {r.gamma} ({r.drafter})" if r.gamma else "auto: plain step"


def _runs_auto(auto: bool, choice: str, has_draft: bool | None) -> bool:
    """Whether Auto runs: chosen, or standing in for the draft model chosen with none loaded (a target
    alone; None: nothing is loaded, and the choice is shown as it will apply)."""
    return auto or (has_draft is False and choice == "model")


class SpecBar(QFrame):
    changed = Signal(dict)            # the bar's generation settings (SPEC_KEYS), after every change

    def __init__(self, generation: dict | None = None, parent=None):
        super().__init__(parent)
        self._why = ""                 # step_gamma's note, shown as a tooltip
        self.setObjectName("specBar")
        self.setFrameShape(QFrame.StyledPanel)
        self._has_draft: bool | None = None   # None: no models loaded (yet, or since the engine stopped)
        self._choice = "model"        # the drafter chosen under Auto too ("model" or "lookup"), as saved
        self._last_round: RoundEvent | None = None
        self._quiet = False
        self._remote: tuple[str, str] | None = None   # (what a llama-server does, how to change it): read-only

        self.switch = QToolButton()
        self.switch.setObjectName("speculateSwitch")
        self.switch.setText("Speculate")
        self.switch.setCheckable(True)
        self.switch.setToolTip(f"Speculative decoding on or off ({TOGGLE_KEYS}); off decodes plainly, "
                               "one target pass per token. Applies from the next round.")
        self.drafter_group = QButtonGroup(self)
        self.drafter_group.setExclusive(True)
        self.drafter_buttons: dict[str, QToolButton] = {}
        segments = QHBoxLayout()
        segments.setSpacing(0)
        for key, label in CHOICES:
            b = QToolButton()
            b.setObjectName(f"drafter_{key}")
            b.setText(label)
            b.setCheckable(True)
            b.setProperty("segment", True)
            self.drafter_group.addButton(b)
            self.drafter_buttons[key] = b
            segments.addWidget(b)
        self.drafter_buttons["lookup"].setToolTip("Copy the continuation of an earlier match in the conversation "
                                                  "(costs no model pass).")
        self.drafter_buttons["auto"].setToolTip(
            f"Choose γ each round for the best expected tokens per second, 0 to {AUTO_GAMMA_MAX} whatever the "
            "slider says; "
            "with a draft model loaded, each round may use the model or a lookup copy; without one, lookup.")
        self.advanced_button = QToolButton()
        self.advanced_button.setObjectName("advancedButton")
        self.advanced_button.setText("Advanced")
        self.advanced_button.setCheckable(True)
        self.advanced_button.setArrowType(Qt.RightArrow)
        self.advanced_button.setToolButtonStyle(Qt.ToolButtonTextBesideIcon)
        self.advanced_button.setToolTip("Draft min and draft p-min")

        self.gamma = QSlider(Qt.Horizontal)
        self.gamma.setObjectName("gammaSlider")
        self.gamma.setRange(1, DRAFT_MAX_LIMIT)
        self.gamma.setPageStep(1)
        self.gamma.setMinimumWidth(80)
        keep = self.gamma.sizePolicy()
        keep.setRetainSizeWhenHidden(True)       # hidden in Auto (a resting slider looked live): the row stays put
        self.gamma.setSizePolicy(keep)
        self.gamma_label = QLabel()
        self.gamma_label.setObjectName("gammaLabel")
        self.gamma_label.setMinimumWidth(self.gamma_label.fontMetrics().horizontalAdvance("auto: γ 32 (lookup)"))
        self.mode = ElidedLabel()                  # never widens the window: a narrow bar ends it in "…"
        self.mode.setObjectName("specMode")

        self.draft_min = QSpinBox()
        self.draft_min.setObjectName("draftMin")
        self.draft_min.setRange(0, DRAFT_MAX_LIMIT)
        self.draft_min.setToolTip("A draft shorter than this is dropped (a plain step instead)")
        self.p_min = QDoubleSpinBox()
        self.p_min.setObjectName("draftPMin")
        self.p_min.setDecimals(2)
        self.p_min.setRange(0.0, P_MIN_MAX)
        self.p_min.setSingleStep(0.05)
        self.p_min.setToolTip(P_MIN_TIP)
        self.advanced = QWidget()
        adv = QHBoxLayout(self.advanced)
        adv.setContentsMargins(0, 0, 0, 0)
        adv.addWidget(QLabel("Draft min"))
        adv.addWidget(self.draft_min)
        adv.addSpacing(12)
        adv.addWidget(QLabel("Draft p-min"))
        adv.addWidget(self.p_min)
        adv.addStretch(1)
        self.advanced.hide()

        self.remote_hint = QLabel()                       # a llama-server's settings: how to change them
        self.remote_hint.setObjectName("remoteHint")
        self.remote_hint.setWordWrap(True)
        self.remote_hint.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.remote_hint.hide()
        self.gamma_caption = QLabel("γ")
        caption_keep = self.gamma_caption.sizePolicy()
        caption_keep.setRetainSizeWhenHidden(True)
        self.gamma_caption.setSizePolicy(caption_keep)
        self._local_controls = [self.switch, *self.drafter_buttons.values(), self.gamma_caption, self.gamma,
                                self.gamma_label, self.advanced_button]
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 4, 8, 4)
        layout.setSpacing(3)
        top = QHBoxLayout()
        top.addWidget(self.switch)
        top.addSpacing(6)
        top.addLayout(segments)
        top.addSpacing(6)
        top.addWidget(self.mode, 1)
        layout.addLayout(top)
        second = QHBoxLayout()
        second.addWidget(self.gamma_caption)
        second.addWidget(self.gamma, 1)
        second.addWidget(self.gamma_label)
        second.addWidget(self.advanced_button)
        layout.addLayout(second)
        layout.addWidget(self.advanced)
        layout.addWidget(self.remote_hint)

        # the shortcuts: the window adds these to itself and to its "Speculation" menu
        self.toggle_action = QAction("Speculate", self)     # (checked while on: "on/off" beside a check was a riddle)
        self.toggle_action.setShortcut(QKeySequence(TOGGLE_KEYS))
        self.toggle_action.setCheckable(True)       # (the menu showed no state: a new user's try)
        self.toggle_action.triggered.connect(lambda: self.switch.toggle())   # (the check follows the switch)
        self.gamma_up_action = QAction("Longer drafts (γ + 1)", self)
        self.gamma_up_action.setShortcut(QKeySequence(UP_KEYS))
        self.gamma_up_action.triggered.connect(lambda: self.step_gamma(1))
        self.gamma_down_action = QAction("Shorter drafts (γ − 1)", self)
        self.gamma_down_action.setShortcut(QKeySequence(DOWN_KEYS))
        self.gamma_down_action.triggered.connect(lambda: self.step_gamma(-1))
        self.actions_list = [self.toggle_action, self.gamma_up_action, self.gamma_down_action]

        self.set_generation(generation or {})
        self.toggle_action.setChecked(self.switch.isChecked())
        self.switch.toggled.connect(self.toggle_action.setChecked)
        self.switch.toggled.connect(self._switched)
        self.drafter_group.buttonClicked.connect(self._drafter_clicked)
        self.gamma.valueChanged.connect(self._changed)
        self.draft_min.valueChanged.connect(self._changed)
        self.p_min.valueChanged.connect(self._changed)
        self.advanced_button.toggled.connect(self._show_advanced)

    # -- settings in and out
    def set_generation(self, g: dict) -> None:
        """Show the settings of `g` (settings["generation"]; other keys are ignored). Emits nothing."""
        self._quiet = True
        drafter = g.get("drafter", "model")
        self.switch.setChecked(bool(g.get("speculation", True)) and drafter != "none")
        self._choice = drafter if drafter in DRAFTER_WORDS else "model"
        self._auto = bool(g.get("auto", False))
        self.gamma.setValue(int(g.get("draft_max", 4)))
        self.draft_min.setValue(int(g.get("draft_min", 0)))
        self.p_min.setValue(float(g.get("draft_p_min", 0.0)))
        self._quiet = False
        self._refresh()

    def generation(self) -> dict:
        """The bar's settings as settings["generation"] keeps them."""
        return {"speculation": self.switch.isChecked(), "drafter": self._choice, "draft_max": self.gamma.value(),
                "draft_min": min(self.draft_min.value(), self.gamma.value()),
                "draft_p_min": min(self.p_min.value(), P_MIN_MAX), "auto": self._auto}

    def spec(self, has_draft_model: bool) -> SpecSettings:
        """The SpecSettings for the engine: Auto drafts with the model when one is loaded, else by lookup.
        The draft model chosen without one loaded (a target alone) runs as Auto: it copies only where
        that pays, where a fixed γ of copies costs up to a fifth of plain speed on text without repeats."""
        g = self.generation()
        drafter = "model" if (g["auto"] or g["drafter"] == "model") and has_draft_model else "lookup"
        auto = _runs_auto(g["auto"], g["drafter"], bool(has_draft_model))
        return SpecSettings(enabled=g["speculation"], drafter=drafter, draft_max=g["draft_max"],
                            draft_min=g["draft_min"], draft_p_min=g["draft_p_min"], auto=auto)

    def set_draft_available(self, available: bool | None) -> None:
        """Whether a draft model is loaded: without one, "Draft model" cannot be chosen (the saved choice
        stays, and Auto, copying by prompt lookup, runs meanwhile). None: no models are loaded at all; the bar then
        shows the choice that will apply once they are, and says that nothing runs yet."""
        self._has_draft = available
        self._refresh()

    def set_remote(self, summary: str | None, how_to_change: str = "") -> None:
        """A llama-server decides speculation at its launch: the bar then only shows what it does
        (`summary`) and, in the tooltip, the command line that would change it. None: local models."""
        self._remote = (summary, how_to_change) if summary else None
        self._refresh()

    # -- the running reply
    def show_round(self, r: RoundEvent) -> None:
        """A round of the running reply: in Auto, the bar shows the γ and drafter auto chose for it."""
        if self._auto_now() and self.switch.isChecked():
            self._last_round = r
            self.gamma_label.setText(auto_text(r))

    def end_reply(self) -> None:
        """The reply ended: Auto's label goes back to the range it chooses from (the reply's footer says
        what it chose), rather than keep the last round's choice, a plain step as often as not."""
        if self._last_round is not None:
            self._last_round = None
            self._refresh()

    # -- actions
    def toggle(self) -> None:
        self.switch.toggle()

    def step_gamma(self, delta: int) -> None:
        """Ctrl+] / Ctrl+[: γ one longer or shorter; where γ is not the user's to set, it says why (the
        keys did nothing in Auto, and said nothing: a new user's try)."""
        if self.gamma.isEnabled():
            self.gamma.setValue(self.gamma.value() + delta)
            return
        on = self.switch.isChecked()
        choose = ("Prompt lookup (no draft model is loaded)" if self._has_draft is False
                  else "Draft model or Prompt lookup")
        why = (f"Auto chooses γ itself, 0 to {AUTO_GAMMA_MAX} each round: choose {choose} to set it." if on
               else f"Speculation is off: turn it on ({TOGGLE_KEYS}) to set γ.")
        self._why = why
        near = self.gamma_label if on else self.mode     # (shown a moment later: from the Speculation menu,
        QTimer.singleShot(TIP_DELAY_MS, near, lambda: QToolTip.showText(  # shown at once, it went as the menu
            near.mapToGlobal(QPoint(0, near.height())), why, near))              # closed; none once `near` is gone)

    def mode_text(self) -> str:
        return self.mode.text()

    # -- internals
    def _drafter_clicked(self, button) -> None:
        key = next(k for k, b in self.drafter_buttons.items() if b is button)
        self._auto = key == "auto"          # (Auto standing in for the draft model, clicked: chosen itself)
        self._last_round = None             # (Auto shows only rounds it chose)
        if key != "auto":
            self._choice = key
        self._changed()

    def _switched(self, on: bool) -> None:
        self._last_round = None
        self._changed()

    def _show_advanced(self, shown: bool) -> None:
        self.advanced.setVisible(shown)
        self.advanced_button.setArrowType(Qt.DownArrow if shown else Qt.RightArrow)

    def _changed(self, *_) -> None:
        if self._quiet:
            return
        self._refresh()
        self.changed.emit(self.generation())

    def _auto_now(self) -> bool:
        return _runs_auto(self._auto, self._choice, self._has_draft)

    def _effective_drafter(self) -> str:
        if self._has_draft is None:                      # nothing loaded: the choice as it will apply
            return self._choice
        return "model" if self._choice == "model" and self._has_draft else "lookup"

    def _refresh(self) -> None:
        on = self.switch.isChecked()
        if QToolTip.isVisible() and QToolTip.text() == self._why:   # (why γ was not the user's to
            QToolTip.hideText()                           # set, stood after Speculation was off: a new user's try)
        model = self.drafter_buttons["model"]
        can_model = self._has_draft is not False
        model.setEnabled(can_model)
        model.setToolTip("Draft with the small draft model loaded beside the target" if self._has_draft
                         else NO_DRAFT_TIP if self._has_draft is False
                         else "Draft with the small draft model of the pair, once a pair with one is loaded")
        auto = self._auto_now()
        shown = "auto" if auto else self._effective_drafter()
        self.drafter_buttons[shown].setChecked(True)
        for b in self.drafter_buttons.values():
            b.setEnabled(on and (b is not model or can_model))
        self.gamma.setEnabled(on and not auto)
        # (only the draft model's drafts have a probability to stop at: p-min sat on, doing nothing, with no
        # draft model loaded, a new user's try)
        model_drafts = self._effective_drafter() == "model" or (auto and self._has_draft is not False)
        self.p_min.setEnabled(on and model_drafts)
        self.p_min.setToolTip(P_MIN_TIP if model_drafts else P_MIN_IDLE_TIP)
        for a in (self.gamma_up_action, self.gamma_down_action):
            a.setEnabled(True)                           # (step_gamma says why γ cannot change)
        gamma = self.gamma.value()
        if on and auto:
            self.gamma_label.setText(auto_text(self._last_round) if self._last_round else f"auto: γ 0–{AUTO_GAMMA_MAX}")
        else:
            self.gamma_label.setText(f"γ = {gamma}" if on else "")
        self.gamma_label.setToolTip(         # (a new user asked what "auto: γ 0–32" meant)
            f"γ: the tokens drafted in a round, checked by the target in one pass. Auto picks 0 to {AUTO_GAMMA_MAX} "
            "each round, and which drafter drafts them; while a reply runs this shows the last round's choice."
            if on and auto else "γ: the tokens drafted in a round, checked by the target in one pass.")
        self.gamma.setToolTip(
            f"Draft length γ: tokens drafted per round ({UP_KEYS} longer, {DOWN_KEYS} shorter). "
            + (f"In Auto the engine picks γ each round, 0 to {AUTO_GAMMA_MAX}, whatever this is set to."
               if auto else "")
            + ("" if on else "Speculation is off."))
        self.advanced.setEnabled(on)
        if not on:
            text, state = "Plain decoding", "plain"
        elif self._has_draft is None:                    # set, but nothing runs until models are loaded
            text = "auto" if self._auto else f"{DRAFTER_WORDS[self._effective_drafter()]}, γ {gamma}"
            text, state = f"Speculation: {text}", "idle"    # (in the colours of "off": nothing runs)
        elif auto:
            text, state = "Speculating: auto", "auto"
        else:
            text, state = f"Speculating: {DRAFTER_WORDS[self._effective_drafter()]}, γ {gamma}", "on"
        shorter = (text.split(": ", 1)[-1],) + ((f"γ {gamma}",) if ", γ" in text else ())
        # (where the bar is narrow: "prompt lookup, γ 4", then "γ 4"; "auto")
        for w in self._local_controls:                   # a llama-server's are not Tandem's to change
            w.setVisible(not self._remote)
        for w in (self.gamma, self.gamma_caption):      # (auto's γ is the label's, not a setting; off, a
            w.setVisible(not self._remote and on and not auto)   # disabled slider looked live: a user's try)
        self.advanced.setVisible(not self._remote and self.advanced_button.isChecked())
        self.remote_hint.setVisible(bool(self._remote))
        if self._remote:
            self.remote_hint.setText(f"Set when the server starts, not per reply: {self._remote[1]}")
        if self._remote:
            for w in (self.switch, self.gamma, self.advanced, *self.drafter_buttons.values()):
                w.setEnabled(False)
            for a in self.actions_list:
                a.setEnabled(False)
            text, state = self._remote[0], "remote"
            self.mode.setText(text)
            self.mode.setToolTip(f"{text}. llama-server takes its speculation settings only when it starts: "
                                 f"{self._remote[1]}")
        else:
            self.switch.setEnabled(True)
            self.toggle_action.setEnabled(True)
            self.mode.setText(text, *shorter)
        if state == "auto":
            text += (", each round the draft model or a lookup copy" if self._has_draft
                     else ", each round a lookup copy or a plain step (no draft model loaded)")
            if not self._auto:
                text += (": it stands in for the draft model chosen, which applies once a pair is loaded. "
                         "Prompt lookup copies at the fixed γ instead")
        if state == "idle":
            text += " — applies once models are loaded (none are loaded now)"
        if state != "remote":
            self.mode.setToolTip(text)
        self.setProperty("mode", state)
        self.setStyleSheet(
            "#specBar { border: 1px solid palette(mid); border-left: 4px solid %s; border-radius: 3px; }"
            "#specMode { color: %s; font-weight: bold; }"
            "#specBar QToolButton[segment=\"true\"] { border: 1px solid palette(mid); padding: 2px 8px;"
            " background: palette(button); }"
            "#specBar QToolButton[segment=\"true\"]:checked { background: palette(highlight);"
            " color: palette(highlighted-text); }"
            "#specBar QToolButton[segment=\"true\"]:disabled { color: palette(mid); background: palette(button); }"
            "#specBar QToolButton[segment=\"true\"]:checked:disabled { background: palette(midlight);"
            " color: palette(dark); }"
            "#speculateSwitch:checked { background: #2e9d4a; color: white; border: 1px solid #23783a;"
            " border-radius: 3px; padding: 2px 6px; }"
            % (("palette(mid)", "palette(text)") if state in ("plain", "idle") else ("#2e9d4a", "#2e9d4a")))
