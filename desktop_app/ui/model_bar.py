"""Choosing and loading the target and draft models."""
from __future__ import annotations

import html
import os
from functools import lru_cache

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (QComboBox, QFileDialog, QGridLayout, QHBoxLayout, QLabel, QProgressBar,
                               QPushButton, QStyle, QStyleOptionComboBox, QWidget)

from desktop_app.models.discovery import distinct_names
from desktop_app.models.gguf_info import GGUFError, read_info
from desktop_app.models.pairing import PairVerdict, check_headers, draft_for
from desktop_app.models.store import models_dir
from desktop_app.ui.backend_row import BackendRow
from desktop_app.ui.pairs_menu import PairsMenu

NO_DRAFT = "(no draft model)"
NO_MODEL = "No model loaded."
IN_USE = "In use until this load ends: "          # the models loaded, while others load
UNREADABLE = ("cannot read", "file not found")     # how describe() starts for a file it cannot read
RELOAD = "Reload"                                   # the Load button, where the pair chosen is the one in use
UNREADABLE_MARK = " (cannot be read)"                # after such a file's name in the boxes, once found so
MAX_LABEL_CHARS = 46        # longer file names are cut in the middle in the boxes


@lru_cache(maxsize=64)
def _summary(path: str, mtime: float) -> str:
    try:
        return read_info(path).summary()
    except GGUFError as exc:                 # read_info's only error: a damaged file is described, never raised
        return f"{UNREADABLE[0]}: {exc}"


def describe(path: str | None) -> str:
    """One line on a model file, as plain text (a damaged or missing file says so)."""
    if not path:
        return ""
    try:
        return _summary(path, os.path.getmtime(path))
    except OSError:
        return UNREADABLE[1]


class ModelBar(QWidget):
    loadRequested = Signal(str, object)     # target path, draft path or None
    demoRequested = Signal()
    folderAdded = Signal(str)
    folderRemoved = Signal(str)
    cancelRequested = Signal()
    serverRequested = Signal(str, str)      # llama-server URL, API key
    choiceChanged = Signal()                # another target or draft chosen (or the same one, read again)
    userChose = Signal()                    # ... by the user (a box, or a file picked with "...")

    pair_verdict: PairVerdict | None = None     # the header check of the chosen pair (None: no draft)
    loaded_pair: tuple[str, str | None] | None = None   # the files loaded (None: none, or a server's)

    def __init__(self, parent=None):
        super().__init__(parent)
        grid = QGridLayout(self)
        grid.setContentsMargins(8, 6, 8, 6)
        grid.setVerticalSpacing(4)
        self._found_unreadable: set[str] = set()     # files marked UNREADABLE_MARK, until found readable
        self._names: dict[str, str] = {}             # the listed files' names as the boxes show them
        self.target = QComboBox()
        self.target.setObjectName("targetCombo")
        self.draft = QComboBox()
        self.draft.setObjectName("draftCombo")
        for combo in (self.target, self.draft):
            # as wide as the longest name shown (names are cut in the middle past MAX_LABEL_CHARS)
            combo.setSizeAdjustPolicy(QComboBox.AdjustToContents)
            combo.setMinimumContentsLength(0)
        browse_t = QPushButton("…")
        browse_t.setToolTip("Choose a target GGUF file (Ctrl+O)")
        browse_t.clicked.connect(lambda: self._browse(self.target))
        browse_d = QPushButton("…")
        browse_d.setToolTip("Choose a draft GGUF file")
        browse_d.clicked.connect(lambda: self._browse(self.draft))
        for b in (browse_t, browse_d):
            b.setFixedWidth(32)
        self.recent = QPushButton("Pairs")
        self.recent.setObjectName("pairsButton")
        self.recent.setToolTip("Recent pairs, the demo pair, and adding or removing a models folder")
        self.recent_menu = PairsMenu(self)
        self.recent_menu.demoRequested.connect(self.demoRequested)
        self.recent_menu.loadRequested.connect(self.loadRequested)
        self.recent_menu.addFolderRequested.connect(self._add_folder)
        self.recent_menu.folderRemoved.connect(self.folderRemoved)
        self.recent.setMenu(self.recent_menu)
        self.load_button = QPushButton("Load")
        self.load_button.setObjectName("loadButton")
        self.load_button.clicked.connect(self._request_load)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self._cancel)
        self.cancel_button.hide()
        for b in (self.recent, self.load_button, self.cancel_button):
            b.setMinimumWidth(b.sizeHint().width())     # never squeezed into an elided text
        self.load_button.setText(RELOAD)
        self.load_button.setMinimumWidth(max(b.sizeHint().width() for b in (self.load_button, self.cancel_button)))
        self.load_button.setText("Load")
        self.backend = BackendRow()
        self.backend.changed.connect(self._backend_changed)
        self.backend.connectRequested.connect(self.serverRequested)
        grid.addWidget(self.backend, 0, 0, 1, 4)
        self.local_widgets = [self.target, self.draft, browse_t, browse_d, self.recent]
        # two rows, so that each name has the room of the whole bar
        self.local_widgets += [QLabel("Target"), QLabel("Draft")]
        grid.addWidget(self.local_widgets[-2], 1, 0)
        grid.addWidget(self.target, 1, 1)
        grid.addWidget(browse_t, 1, 2)
        grid.addWidget(self.recent, 1, 3)
        grid.addWidget(self.local_widgets[-1], 2, 0)
        grid.addWidget(self.draft, 2, 1)
        grid.addWidget(browse_d, 2, 2)
        buttons = QHBoxLayout()
        buttons.setSpacing(4)
        buttons.addWidget(self.load_button)
        buttons.addWidget(self.cancel_button)
        grid.addLayout(buttons, 2, 3)
        self.verdict = QLabel()
        self.verdict.setObjectName("pairVerdict")
        self.verdict.setWordWrap(True)
        self.verdict.hide()
        grid.addWidget(self.verdict, 3, 0, 1, 4)
        self.info = QLabel()
        self.info.setObjectName("modelInfo")
        self.info.setWordWrap(True)
        self.info.setTextInteractionFlags(Qt.TextSelectableByMouse)
        grid.addWidget(self.info, 4, 0, 1, 4)
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.hide()
        grid.addWidget(self.progress, 5, 0, 1, 4)
        self.status = QLabel(NO_MODEL)
        self._status_before: tuple[str, str] | None = None   # the status line's text and style under a busy stage
        self._loaded_text = NO_MODEL                        # what it says of the models loaded, and the choice
        self._error_choice: tuple | None = None             # its error was shown at (None: no error shown)
        self.status.setObjectName("modelStatus")
        self.status.setWordWrap(True)
        grid.addWidget(self.status, 6, 0, 1, 4)
        grid.setColumnStretch(1, 1)
        self.target.currentIndexChanged.connect(self._update_info)
        self.draft.currentIndexChanged.connect(self._update_info)
        self._draft_wanted: str | None = None     # the draft last chosen, by the user or select(): _draft_to_match
        self.target.activated.connect(self._draft_to_match)   # (before the window hears of the choice)
        self.target.activated.connect(self.userChose)
        self.draft.activated.connect(lambda: setattr(self, "_draft_wanted", self.draft_path()))
        self.draft.activated.connect(self.userChose)
        self.draft.addItem(NO_DRAFT, None)
        self._fit(self.draft)

    def _backend_changed(self, key: str) -> None:
        """A llama-server brings its own models: the file choices give way to its address."""
        local = key != "server"
        for w in self.local_widgets + [self.load_button]:
            w.setVisible(local)
        self._update_info()

    def rpc_servers(self) -> str:
        return self.backend.rpc_servers()

    def label(self, path: str) -> str:
        """A file's name as the boxes show it (with where it was found, where the lists hold another file
        of its name: distinct_names): whole up to MAX_LABEL_CHARS average characters, else cut in the
        middle (the path is in the tooltip)."""
        name = os.path.basename(path)
        where = (self._names.get(path) or name)[len(name):]      # " (LM Studio)": kept whole, the name cut
        fm = self.target.fontMetrics()
        room = max(fm.averageCharWidth() * MAX_LABEL_CHARS - fm.horizontalAdvance(where), fm.averageCharWidth() * 16)
        return fm.elidedText(name, Qt.ElideMiddle, room) + where

    def _add(self, combo: QComboBox, path: str) -> None:
        combo.addItem(self.label(path), path)
        combo.setItemData(combo.count() - 1, path, Qt.ToolTipRole)
        self._fit(combo)

    @staticmethod
    def _fit(combo: QComboBox) -> None:
        """A box never narrower than its longest name (QComboBox keeps its first minimum size hint)."""
        fm = combo.fontMetrics()
        text = max((fm.horizontalAdvance(combo.itemText(i)) for i in range(combo.count())), default=0)
        opt = QStyleOptionComboBox()
        combo.initStyleOption(opt)
        width = combo.style().sizeFromContents(QStyle.CT_ComboBox, opt, QSize(text + 8, fm.height()), combo).width()
        combo.setMinimumWidth(width)

    # -- choices
    def set_choices(self, files: list[str], recent_pairs: list[dict], demo_available: bool,
                    demo_pair: tuple[str, str | None] | None = None, folders: list[str] = ()) -> None:
        """`demo_pair`, `folders`: as PairsMenu.fill's."""
        current_t, current_d = self.target_path(), self.draft_path()
        self.target.blockSignals(True)
        self.draft.blockSignals(True)
        self.target.clear()
        self.draft.clear()
        self.draft.addItem(NO_DRAFT, None)
        for combo in (self.target, self.draft):
            self._fit(combo)
        self._names = distinct_names(files)
        for path in files:
            self._add(self.target, path)
            self._add(self.draft, path)
        for path in self._found_unreadable & set(files):   # (found so before: the lists were filled again after
            self._mark_unreadable(path, describe(path).startswith(UNREADABLE))   # a load, and the mark was
                                                                                 # gone, a new user's try)
        self.target.blockSignals(False)
        self.draft.blockSignals(False)
        self.select(current_t, current_d)
        self.recent_menu.fill(recent_pairs, demo_available, demo_pair, list(folders))

    def _ensure(self, combo: QComboBox, path: str) -> int:
        index = combo.findData(path)
        if index < 0:
            self._add(combo, path)
            index = combo.count() - 1
        return index

    def select(self, target: str | None, draft: str | None) -> None:
        self._draft_wanted = draft
        if target:
            self.target.setCurrentIndex(self._ensure(self.target, target))
        self.draft.setCurrentIndex(self._ensure(self.draft, draft) if draft else 0)
        self._update_info()

    def unreadable(self) -> str | None:
        """The first chosen file (target, then draft) that cannot be read, or None."""
        return next((p for p in (self.target_path(), self.draft_path()) if p and describe(p).startswith(UNREADABLE)),
                    None)

    def target_path(self) -> str | None:
        return self.target.currentData()

    def loadable(self) -> tuple[str | None, str | None, str]:
        """What of the chosen pair can load, told from the files' headers (as the lines under the boxes
        tell it): (target, draft, ""); the target alone, with why the draft cannot go with it; or
        (None, None, why) where the target cannot be read. (The welcome page offered "Load this pair"
        for a pair this bar called unable to pair, and for a file that was no GGUF: a new user's try.)
        Where the headers cannot tell, the pair goes: the engine's check decides."""
        t, d = self.target_path(), self.draft_path()
        said = {path: describe(path) for path in (t, d) if path}
        # (why, in the bar's own words only: said again in others', one bad file read as three failures,
        # a new user's try; a file that cannot load by its whole path: "hostname" said nothing of /etc)
        if not t or said[t].startswith(UNREADABLE):
            return None, None, f"{t} cannot be loaded: its line in the bar above says why" if t else ""
        if d and said[d].startswith(UNREADABLE):
            return t, None, f"the draft {d} cannot be loaded: its line in the bar above says why"
        if d and self.pair_verdict is not None and self.pair_verdict.ok is False:
            return t, None, f"the draft {os.path.basename(d)} cannot pair with it: the bar above says why"
        return t, d, ""

    def says_why(self, failure: str) -> str:
        """Where the bar's lines already say why a load failed (`failure`, the engine's words: a file they
        call unreadable, or a pair they call unable to pair), a short message pointing there; else ""."""
        bad = self.unreadable()
        if bad and failure.startswith(os.path.basename(bad) + ":"):
            return f"Could not load {os.path.basename(bad)}: its line above says why."
        if self.pair_verdict is not None and self.pair_verdict.ok is False and " cannot draft for " in failure:
            return "Could not load this pair: the red line above says why."
        return ""

    def draft_path(self) -> str | None:
        return self.draft.currentData()

    def _browse(self, combo: QComboBox) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Choose a GGUF model", self._start_folder(combo),
                                              "GGUF models (*.gguf);;All files (*)")
        if path:
            combo.setCurrentIndex(self._ensure(combo, path))
            combo.activated.emit(combo.currentIndex())     # (as a choice in its list: the draft follows a target)

    def _draft_to_match(self) -> None:
        """A target chosen: the draft last chosen where it pairs with it, else the draft among those
        listed that a pair would be suggested with, else none (the draft stayed, under a red "cannot
        pair", and Load refused: a new user's try). The draft chosen comes back with a target it pairs
        with, as the wheel or the arrow keys pass over others."""
        t, wanted = self.target_path(), self._draft_wanted
        if not (t and wanted):
            return
        if check_headers(t, wanted).ok is False:
            wanted = draft_for(t, [self.draft.itemData(i) for i in range(1, self.draft.count())])
        self.draft.setCurrentIndex(max(0, self.draft.findData(wanted)) if wanted else 0)

    def _start_folder(self, combo: QComboBox) -> str:
        """Where choosing a file starts: the folder of the file chosen in `combo` (else the target's), else
        the folder fetched models go to, else home."""
        for path in (combo.currentData(), self.target_path()):
            if path and os.path.isdir(os.path.dirname(path)):
                return os.path.dirname(path)
        fetched = str(models_dir())
        return fetched if os.path.isdir(fetched) else os.path.expanduser("~")

    def _add_folder(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Add a folder with GGUF models", os.path.expanduser("~"))
        if folder:
            self.folderAdded.emit(folder)

    def browse_target(self) -> None:
        self._browse(self.target)

    def set_loaded(self, pair: tuple[str, str | None] | None) -> None:
        self.loaded_pair = pair
        if pair is None:
            if self.status.text().startswith(IN_USE):    # (let go before a load: no longer in use)
                self._show_status("")
            self._loaded_text = NO_MODEL
        self._update_info()

    def _update_info(self) -> None:
        """The chosen files' lines and their pair's verdict, while a pair is being chosen; once it is the
        one loaded they fold away (the chat needs the height: the line under them says what is loaded),
        and stay in the boxes' tooltips."""
        t, d = self.target_path(), self.draft_path()
        for combo, path in ((self.target, t), (self.draft, d)):
            combo.setToolTip("\n".join(x for x in (path, describe(path)) if x))
            if path:
                self._mark_unreadable(path, describe(path).startswith(UNREADABLE))
        self._update_verdict(t, d)
        lines = []
        if t:
            lines.append(f"<b>Target</b>: {html.escape(describe(t))}")
        if d:
            lines.append(f"<b>Draft</b>: {html.escape(describe(d))}")
        self.info.setText("<br>".join(lines))
        local = self.backend.backend() != "server"
        folded = t is not None and (t, d) == self.loaded_pair      # (a verdict that is not "OK" stays)
        self.info.setVisible(local and not folded)
        # (for the pair in use the button read "Load", and a click loaded it again unasked: a new user's try)
        self.load_button.setText(RELOAD if folded else "Load")
        self.load_button.setToolTip("Load this pair again: it is the one in use" if folded else "")
        self.verdict.setVisible(local and self.pair_verdict is not None                  # (a warning stays:
                                and (not folded or self.pair_verdict.ok is not True or bool(self.pair_verdict.warning)))
        self._error_gives_way()
        self.choiceChanged.emit()

    def _mark_unreadable(self, path: str, unreadable: bool) -> None:
        """A chosen file named in both boxes as what its header says now: "… (cannot be read)" and greyed
        where it cannot be read (it stays, as the user may mend it, but choosing another no longer means
        trying each in turn), its plain name again once it can."""
        (self._found_unreadable.add if unreadable else self._found_unreadable.discard)(path)
        text = self.label(path) + (UNREADABLE_MARK if unreadable else "")
        for combo in (self.target, self.draft):
            i = combo.findData(path)
            if i >= 0 and combo.itemText(i) != text:
                combo.setItemText(i, text)
                combo.setItemData(i, self.palette().color(QPalette.Disabled, QPalette.Text) if unreadable else None,
                                  Qt.ForegroundRole)
                self._fit(combo)

    def _error_gives_way(self) -> None:
        """Another file chosen since the last attempt's error: the line says what is loaded again."""
        if self._error_choice not in (None, (self.target_path(), self.draft_path())) and self._status_before is None:
            self._show_status(self._loaded_text)

    def _update_verdict(self, target: str | None, draft: str | None) -> None:
        """Whether the chosen draft can speculate for the chosen target, from the headers alone, before
        Load (which stays enabled: the engine's check on the loaded vocabularies decides)."""
        if not (target and draft) or self.unreadable():
            self.pair_verdict = None              # (an unreadable file's own line says why: once is enough)
            return
        self.pair_verdict = check_headers(target, draft)
        self.verdict.setText(self.pair_verdict.text + ("." if self.pair_verdict.ok is False or self.pair_verdict.warning
                                                       else ""))
        self.verdict.setStyleSheet("color: #c0392b;" if not self.pair_verdict.ok
                                   else "color: #b35900;" if self.pair_verdict.warning else "")

    def _request_load(self) -> None:
        if self.target_path():
            self.loadRequested.emit(self.target_path(), self.draft_path())

    # -- progress and outcome
    def show_progress(self, text: str, fraction: float | None, waiting: bool = False) -> None:
        """A load's or a fetch's stage and how far it is (None: a stage that cannot say, shown busy).
        `waiting`: it has not started (it waits for a reply to end): an empty bar, the stage under it
        (a busy bar over "Loading once the reply or compare ends…" read as a full one, a new user's try)."""
        if self.status.text() == NO_MODEL or self.status.styleSheet():   # (nothing loaded, or an error from
            self._show_status("")                                        # before: the bar says what happens now)
        elif self.status.text() == self._loaded_text and self.loaded_pair is not None:   # ("Loaded X" under
            self._show_status(self._loaded_text.replace("Loaded ", IN_USE, 1))   # "Loading 47 %" read as stale)
        self.progress.show()
        self.load_button.setEnabled(False)
        self.load_button.hide()                 # Cancel takes its place: the row keeps its width
        self.cancel_button.show()
        self.progress.setRange(0, 0 if fraction is None and not waiting else 1000)
        if fraction is not None or waiting:
            self.progress.setValue(int(1000 * (fraction or 0.0)))
            self._busy_stage("")
        if self.cancel_button.isEnabled():      # (once pressed, the bar says so until the answer comes)
            self.progress.setFormat("" if waiting else f"{text} %p%")
            if fraction is None:
                self._busy_stage(f"{text}…")

    def _busy_stage(self, text: str) -> None:
        """A busy bar draws no text: the stage goes on the status line under it meanwhile ("": what that
        line said before comes back)."""
        if text and self._status_before is None:
            self._status_before = (self.status.text(), self.status.styleSheet())
        elif not text and self._status_before is not None:
            self.status.setText(self._status_before[0])
            self.status.setStyleSheet(self._status_before[1])
            self._status_before = None
            self._error_gives_way()               # (a choice made meanwhile)
        if text:
            self.status.setStyleSheet("")
            self.status.setText(text)

    def _cancel(self) -> None:
        self.cancel_button.setEnabled(False)
        self.progress.setFormat("Cancelling…")
        if self._status_before is not None:
            self._busy_stage("Cancelling…")
        self.cancelRequested.emit()

    def hide_progress(self) -> None:
        self._busy_stage("")
        self.progress.hide()
        self.cancel_button.hide()
        self.cancel_button.setEnabled(True)
        self.load_button.setVisible(self.backend.backend() != "server")
        self.load_button.setEnabled(True)

    def show_loaded(self, text: str) -> None:
        self.hide_progress()
        self._loaded_text = text
        self._show_status(text)

    def show_error(self, text: str) -> None:
        """An attempt failed: said in red until another file is chosen or a reply ends (error_is_past;
        then the line says what is loaded again: the error stayed, and piled up under later ones, a
        user's try)."""
        self.hide_progress()
        self._show_status(text, error=True)

    def error_is_past(self) -> None:
        """A reply ended with the pair loaded: the red line of an attempt before gives way to what is
        loaded (it stayed through later replies: a new user's try). Not while another load runs."""
        if self._error_choice is not None and self._status_before is None and self.progress.isHidden():
            self._show_status(self._loaded_text)

    def _show_status(self, text: str, error: bool = False) -> None:
        self.status.setStyleSheet("color: #c0392b;" if error else "")
        self.status.setText(text)
        self._error_choice = (self.target_path(), self.draft_path()) if error else None
