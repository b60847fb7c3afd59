"""The main window's layout and menus: the three parts (conversations, chat, panel) in a splitter whose
sides fold away from the View menu (or by dragging a handle to the edge; a folded side is hidden with
its handle, and comes back from the View menu), sizes remembered; the menus
and their shortcuts (File, Chat, Speculation, View with token-origin highlighting, Help with the keys
and how to read the panel). A mixin of
MainWindow (main_window.py)."""
from __future__ import annotations

from PySide6.QtCore import QByteArray, QPoint, QSize, Qt, QTimer
from PySide6.QtGui import QAction, QGuiApplication, QKeySequence
from PySide6.QtWidgets import QMenu, QScrollArea, QTabWidget, QWidget

from desktop_app.ui.help_dialog import PANEL_HELP, HelpDialog, shortcuts_html
from desktop_app.ui.system_dialog import SystemDialog

SIDEBAR, CENTER, PANEL = 0, 1, 2          # the splitter's parts
SIDE_NAMES = {SIDEBAR: "conversations", PANEL: "panel"}   # as the settings' "window" names the folded ones
HELP_WIDTH_MIN = 360                      # the panel's help, narrowed to fit beside the panel, at least
MIN_CHAT_WIDTH = 500                      # what the default layout leaves the chat, at 1000 px and up
SAVE_DELAY_MS = 1000                      # settings are saved this long after their last change


def side_tabs(pages: dict[str, QWidget]) -> QTabWidget:
    """The panel's tabs, each page in a scroll area: a short window scrolls it, never outgrows the
    screen. A scroll area is no Tab stop: nothing showed the focus there (a new user's Tab went
    through 11 such stops, the plots' among them); the tab bar and the pages' own controls are."""
    tabs = QTabWidget()
    for title, page in pages.items():
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.NoFrame)
        scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        scroll.setFocusPolicy(Qt.NoFocus)
        scroll.setWidget(page)
        tabs.addTab(scroll, title)
    return tabs


class LayoutMixin:
    def _escape(self) -> None:
        """Esc: stop the reply (or compare) running; with none, end a search, or else an edit under way
        (only the banner's Cancel edit did: a new user's try), also while models load."""
        if self.stop():
            return
        if self.sidebar.search.text():
            self.sidebar.search.clear()
            self.composer.setFocus()              # (the next words typed became a search: a new user's try)
        elif self.editing:
            self._cancel_edit()

    def _actions(self) -> None:
        actions = {}
        for text, keys, slot in (
                ("New conversation", QKeySequence.New, self.new_conversation),
                ("Next conversation", "Ctrl+PgDown", lambda: self.sidebar.step(1)),
                ("Previous conversation", "Ctrl+PgUp", lambda: self.sidebar.step(-1)),
                ("Search conversations", QKeySequence.Find, lambda: self.sidebar.search.setFocus()),
                ("Stop", Qt.Key_Escape, self._escape),
                ("Regenerate", "Ctrl+R", self.regenerate),
                ("Continue the reply", "Ctrl+Shift+Return", self.continue_reply),
                ("Earlier version of the reply", "Alt+Left", lambda: self._step_version(-1)),
                ("Later version of the reply", "Alt+Right", lambda: self._step_version(1)),
                ("Edit last message", "Ctrl+E", self.edit_last),
                ("Copy last reply", "Ctrl+Shift+C", self.copy_last_reply),
                ("Compare with and without speculation", "Ctrl+Shift+K", self.compare),
                ("Go to the message box", "Ctrl+L", lambda: self.composer.setFocus()),
                ("Open target model…", QKeySequence.Open, self.model_bar.browse_target),
                ("Export conversation…", "Ctrl+Shift+S", self.export_conversation),
                ("Import conversation…", "", self.import_conversation),
                ("Rename conversation", "F2", self.sidebar.rename_current),
                ("Keyboard shortcuts", "Ctrl+/", self.show_shortcuts),
                ("Reading the speculation panel", QKeySequence.HelpContents, self.show_panel_help),   # (F1: help,
                ("About Tandem and this system…", "", self.show_system),   # not a dump of CPU flags, a user's try)
                ("Quit", QKeySequence.Quit, self.close)):
            action = actions[text] = QAction(text, self)
            action.setShortcut(QKeySequence(keys))
            action.triggered.connect(slot)
            self.addAction(action)
        self.addActions(self.spec_bar.actions_list)
        self.sidebar.activated.connect(self.composer.setFocus)   # (Return in the list: on to the box)
        self.worker.busyChanged.connect(self._unsent_note_is_past)    # (methods: Qt calls them on this thread)
        self.composer.textChanged.connect(self._unsent_note_is_past)
        self.compare_action = actions["Compare with and without speculation"]
        self.regenerate_action, self.edit_action = actions["Regenerate"], actions["Edit last message"]
        self.continue_action = actions["Continue the reply"]
        self.continue_action.setShortcuts([QKeySequence("Ctrl+Shift+Enter"), QKeySequence("Ctrl+Shift+Return")])
        self.copy_reply_action, self.export_action = actions["Copy last reply"], actions["Export conversation…"]
        self.version_actions = (actions["Earlier version of the reply"], actions["Later version of the reply"])
        self.sidebar.list.addActions([actions["Rename conversation"], self.export_action, self.sidebar.delete_action])
        self._update_buttons()
        menus = self.menuBar()
        for title, names in (("&File", ("New conversation", "Next conversation", "Previous conversation",
                                        "Search conversations", None, "Open target model…", None, "Export conversation…",
                                        "Import conversation…", None, "Quit")),
                             ("&Chat", ("Regenerate", "Continue the reply", "Earlier version of the reply",
                                        "Later version of the reply",
                                        "Edit last message", "Copy last reply", None,
                                        "Compare with and without speculation")),
                             ("&Help", ("Keyboard shortcuts", "Reading the speculation panel", None,
                                        "About Tandem and this system…"))):
            menu = menus.addMenu(title)
            for name in names:
                if name:
                    menu.addAction(actions[name])
                else:
                    menu.addSeparator()
        speculation = QMenu("&Speculation", self)          # the speculation bar's shortcuts, before Help
        speculation.addActions(self.spec_bar.actions_list)
        menus.insertMenu(menu.menuAction(), speculation)

    def _update_menu(self, regen_ok: bool, can_edit: bool, can_compare: bool, writing_here: bool) -> None:
        """The Chat menu's items where they apply: as the buttons beside the box, but also while a run is
        under way (then they say why they wait); Copy last reply where there is a reply, or one is being
        written here (`writing_here`; they were offered in an empty conversation: a new user's try). The versions' are
        show_versions'."""
        if hasattr(self, "compare_action"):         # (not before the actions are made)
            self.compare_action.setEnabled(can_compare)
            self.regenerate_action.setEnabled(regen_ok)
            self.edit_action.setEnabled(can_edit)
            self.copy_reply_action.setEnabled(writing_here or any(m.role == "assistant" for m in self.chat.messages))
            self.export_action.setEnabled(self.current_id is not None)

    def show_shortcuts(self) -> HelpDialog:
        """Every key the window answers, read from its actions (Help ▸ Keyboard shortcuts, Ctrl+/)."""
        return self._help("Keyboard shortcuts", shortcuts_html(self.actions()))

    def show_panel_help(self) -> HelpDialog:
        """What the panel's rounds, colours and numbers mean (Help ▸ Reading the speculation panel): the
        panel shown (unfolded, its Speculation page) and the help beside it, over the chat rather than
        over the panel, narrower where the chat is narrow, and not modal, so that both can be read at
        once (it opened modal over the panel's edge: a new user's try). Asked for again while open, the
        one open comes to the front."""
        dialog = getattr(self, "_panel_help", None)
        if dialog is not None and dialog.isVisible():
            dialog.raise_()
            dialog.activateWindow()
            return dialog
        self.show_side(PANEL, True)
        self.tabs.setCurrentWidget(self.spec_scroll)
        dialog = self._panel_help = HelpDialog("Reading the speculation panel", PANEL_HELP, self)
        dialog.setAttribute(Qt.WA_DeleteOnClose)
        dialog.destroyed.connect(lambda: setattr(self, "_panel_help", None))
        panel_left = self.tabs.mapToGlobal(QPoint(0, 0)).x()
        screen = (self.screen() or QGuiApplication.primaryScreen()).availableGeometry()
        frame = 16                                   # (a window frame's width, about, either side)
        room = panel_left - screen.left() - frame - 8
        if room >= HELP_WIDTH_MIN:
            dialog.resize(min(dialog.width(), room), dialog.height())
        dialog.resize(dialog.width(), min(dialog.height(), screen.height() - 60))
        left = max(screen.left(), panel_left - dialog.width() - frame - 8)
        top = min(max(screen.top(), self.mapToGlobal(QPoint(0, 0)).y() + 40),
                  screen.bottom() - dialog.height() - 40)
        dialog.move(min(left, screen.right() - dialog.width()), max(screen.top(), top))
        dialog.show()
        return dialog

    def _help(self, title: str, body: str) -> HelpDialog:
        dialog = HelpDialog(title, body, self)
        dialog.setAttribute(Qt.WA_DeleteOnClose)
        dialog.open()
        return dialog

    def show_system(self) -> SystemDialog:
        """Versions, the llama.cpp build and its CPU features, the weight-repacking decision and the
        folders: what a bug report needs, gathered by `tandem doctor` in a child process."""
        in_use = " ".join(t for t in (self.model_bar.status.text(), self.spec_bar.mode_text() + ".") if t)
        dialog = SystemDialog(self, in_use=in_use)
        dialog.setAttribute(Qt.WA_DeleteOnClose)
        dialog.open()
        return dialog

    # -- conversations

    def _view(self) -> QMenu:
        """The menu bar's View menu, made (before Help) the first time it is asked for."""
        menus = self.menuBar()
        view = next((a.menu() for a in menus.actions() if a.menu() and a.text() == "&View"), None)
        if view is None:
            view = QMenu("&View", self)
            help_menu = next((a for a in menus.actions() if a.text() == "&Help"), None)
            if help_menu:
                menus.insertMenu(help_menu, view)
            else:
                menus.addMenu(view)
        return view

    def _view_menu(self) -> None:
        """View ▸ Highlight token origins (Ctrl+Shift+H), remembered in the window settings."""
        view = self._view()
        self.highlight_action = QAction("Highlight token origins", self, checkable=True)
        self.highlight_action.setShortcut(QKeySequence("Ctrl+Shift+H"))
        self.highlight_action.setToolTip("Colour each token of a reply by where it came from: kept draft, "
                                         "correction, bonus or plain step")
        self.highlight_action.toggled.connect(self.set_highlight_origins)
        self.addAction(self.highlight_action)
        view.addAction(self.highlight_action)
        self.highlight_action.setChecked(self.settings["window"].get("highlight_origins") == "on")

    def set_highlight_origins(self, on: bool) -> None:
        self.chat.set_highlight_origins(on)
        if self.highlight_action.isChecked() != on:
            self.highlight_action.setChecked(on)
        if self.settings["window"].get("highlight_origins", "off") != ("on" if on else "off"):
            self.settings.data["window"]["highlight_origins"] = "on" if on else "off"
            self._say(self._save_settings())

    def _layout_actions(self) -> None:
        """View ▸ Show conversations (Ctrl+B) and Show speculation panel (Ctrl+Shift+B)."""
        view = self._view()
        self.sidebar_action = QAction("Show conversations", self, checkable=True, checked=True)
        self.sidebar_action.setShortcut(QKeySequence("Ctrl+B"))
        self.sidebar_action.toggled.connect(lambda on: self.show_side(SIDEBAR, on))
        self.panel_action = QAction("Show speculation panel", self, checkable=True, checked=True)
        self.panel_action.setShortcut(QKeySequence("Ctrl+Shift+B"))
        self.panel_action.toggled.connect(lambda on: self.show_side(PANEL, on))
        for action in (self.sidebar_action, self.panel_action):
            self.addAction(action)
            view.addAction(action)

    def _default_size(self) -> QSize:
        """1280×800, or the screen's free area where that is smaller."""
        screen = self.screen().availableGeometry() if self.screen() else None
        if screen is None or screen.isEmpty():
            return QSize(1280, 800)
        return QSize(min(1280, screen.width()), min(800, screen.height()))

    def _default_sizes(self, width: int) -> list[int]:
        """Conversations, chat, panel for a window `width` wide: the chat gets MIN_CHAT_WIDTH or more."""
        width -= 2 * self.splitter.handleWidth()
        side = max(self.sidebar.minimumSizeHint().width(), 200 if width >= 1200 else 170)
        panel = max(self.tabs.minimumSizeHint().width(), min(420, width - side - MIN_CHAT_WIDTH, int(width * 0.32)))
        return [side, max(MIN_CHAT_WIDTH, width - side - panel), panel]

    def side_shown(self, index: int) -> bool:
        """Whether the conversations (SIDEBAR) or the panel (PANEL) show (not folded away)."""
        return self.splitter.sizes()[index] > 0

    def show_side(self, index: int, show: bool) -> None:
        """Unfold (at its last width) or fold away the conversations or the panel; the chat takes the rest.
        A folded side is hidden, so that it no longer counts in the window's least width (folded at
        size 0 alone, both sides still held an 800-px window at 958 px, off a small screen)."""
        sizes = self.splitter.sizes()
        if show != (sizes[index] > 0):
            self._default_layout = False
            widget = self.splitter.widget(index)
            if show:
                default = self._default_sizes(self.width())[index]
                width = self._side_widths.get(index) or default
                if sizes[CENTER] - width < MIN_CHAT_WIDTH:   # a width kept from a wider window or screen (it
                    width = min(width, default)             # squeezed the chat to its least): the default
                width = max(width, widget.minimumSizeHint().width())
                widget.show()
                sizes[index], sizes[CENTER] = width, max(sizes[CENTER] - width, 1)
                self.splitter.setSizes(sizes)
            else:
                self._side_widths[index] = sizes[index]
                sizes[index], sizes[CENTER] = 0, sizes[CENTER] + sizes[index]
                self.splitter.setSizes(sizes)
                widget.hide()
        self._sync_layout_actions()
        self._save_soon()

    def folded_sides(self) -> list[int]:
        """The sides folded away (SIDEBAR, PANEL), as the settings keep them."""
        return [index for index in (SIDEBAR, PANEL) if not self.side_shown(index)]

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if self._default_layout:
            self.splitter.setSizes(self._default_sizes(self.splitter.width()))
        self._save_soon()

    def moveEvent(self, event) -> None:
        super().moveEvent(event)
        self._save_soon()

    def _splitter_moved(self, *_args) -> None:
        self._default_layout = False
        for index in self.folded_sides():        # a handle dragged to the edge folds the side as the menu does
            self.splitter.widget(index).hide()
        self._sync_layout_actions()
        self._save_soon()

    # -- saving the settings
    def _autosave(self) -> None:
        """The settings are saved a second after a change, and when the desktop session ends (a logout
        that does not close the window first), not only at Quit: a logout, a kill or a crash lost every
        change made since the app started."""
        self._save_timer = QTimer(self, singleShot=True, interval=SAVE_DELAY_MS)
        self._save_timer.timeout.connect(self.store_settings)
        self.settings_panel.changed.connect(self._save_soon)
        self.spec_bar.changed.connect(self._save_soon)
        QGuiApplication.instance().commitDataRequest.connect(self.store_settings)
        QGuiApplication.instance().commitDataRequest.connect(self.keep_unsent)

    def _save_soon(self) -> None:
        if hasattr(self, "_save_timer") and not self._closing:
            self._save_timer.start()

    def store_settings(self, *_args) -> None:
        """Save the window's settings as its widgets hold them: sampling, speculation, loading, the
        window's size and layout."""
        if not hasattr(self, "_save_timer") or self._closing:       # (closing saved them)
            return
        self._save_timer.stop()
        self.settings.data["window"].update({"geometry": bytes(self.saveGeometry().toBase64()).decode(),
                                             "splitter": bytes(self.splitter.saveState().toBase64()).decode(),
                                             "folded": " ".join(SIDE_NAMES[i] for i in self.folded_sides()),
                                             # (the splitter's state would restore a hidden side as shown)
                                             "widths": " ".join(f"{SIDE_NAMES[i]}:{w}" for i, w in
                                                                sorted(self._side_widths.items()))})
                                             # (a folded side's width, to unfold at after a restart)
        if self.current_id is not None:     # (none open yet, while the models load: the one open at Quit
            self.settings.data["window"]["conversation"] = str(self.current_id)   # stays, for open_latest)
        self.settings.data["generation"].update(self.settings_panel.generation())
        self.settings.data["generation"].update(self.spec_bar.generation())
        self.settings.data["loading"] = self.settings_panel.loading()
        self._say(self._save_settings())

    def _sync_layout_actions(self) -> None:
        """The View menu's checks follow the splitter (a handle dragged to the edge folds a side too)."""
        sizes = self.splitter.sizes()
        for index, action in ((SIDEBAR, self.sidebar_action), (PANEL, self.panel_action)):
            if sizes[index] > 0:
                self._side_widths[index] = sizes[index]
            if action.isChecked() != (sizes[index] > 0):
                action.blockSignals(True)
                action.setChecked(sizes[index] > 0)
                action.blockSignals(False)

    def _restore_layout(self) -> None:
        window = self.settings["window"]
        if window.get("geometry"):
            self.restoreGeometry(QByteArray.fromBase64(window["geometry"].encode()))
        if window.get("splitter"):
            self._default_layout = not self.splitter.restoreState(QByteArray.fromBase64(window["splitter"].encode()))
        if "folded" in window:
            folded = [i for i, name in SIDE_NAMES.items() if name in window["folded"].split()]
        else:                                      # (settings saved before sides were hidden: folded at size 0)
            folded = self.folded_sides()
        for index in (SIDEBAR, PANEL):
            if index in folded:
                self.show_side(index, False)
                self.splitter.widget(index).hide()     # (restored at size 0: show_side had nothing to fold)
        names = {name: index for index, name in SIDE_NAMES.items()}
        for item in window.get("widths", "").split():  # "conversations:240 panel:380" (a hand-edited one may
            name, _, width = item.partition(":")         # hold anything: what is not a width is left out)
            if name in names and width.isascii() and width.isdigit() and 0 < int(width) <= 10_000 \
                    and names[name] in folded:
                self._side_widths[names[name]] = int(width)
        self._sync_layout_actions()
