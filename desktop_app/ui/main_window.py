"""The main window: conversations on the left, the chat in the middle, speculation and settings on
the right. All model work goes through the one EngineWorker on its own thread."""
from __future__ import annotations

import os
import threading

from PySide6.QtCore import QByteArray, QSize, Qt, QThread, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (QHBoxLayout, QMainWindow, QMenu, QPushButton, QScrollArea, QSplitter,
                               QStackedWidget, QTabWidget, QVBoxLayout, QWidget)

from desktop_app import models
from desktop_app.chat.history import HistoryError, HistoryStore
from desktop_app.chat.rules import can_regenerate, last_user_message, reply_status, user_positions
from desktop_app.chat.session import DEFAULT_TITLE, GenerationOptions
from desktop_app.chat.settings_file import SettingsFile
from desktop_app.engine.events import FinishEvent, TokenEvent
from desktop_app.engine.process.client import STAGES
from desktop_app.models.discovery import find_gguf_files
from desktop_app.models.pairing import suggest_pair
from desktop_app.ui.banner import Banner
from desktop_app.ui.chat_view import ChatView
from desktop_app.ui.compare_dialog import CompareDialog
from desktop_app.ui.composer import Composer
from desktop_app.ui.conversation_list import ConversationList
from desktop_app.ui.first_run import FirstRun
from desktop_app.ui.live_reply import LiveReply
from desktop_app.ui.model_bar import ModelBar
from desktop_app.engine.rpc import WARNING as RPC_WARNING
from desktop_app.engine.rpc import RpcError
from desktop_app.ui.settings_panel import SettingsPanel, load_options, rpc_options
from desktop_app.ui.spec_bar import SpecBar
from desktop_app.ui.spec_panel import SpecPanel, stored_header
from desktop_app.ui.system_dialog import SystemDialog
from desktop_app.ui.worker import EngineWorker, GenerateRequest, LoadedPair, LoadRequest, ServerRequest

CLOSE_GRACE_S = 3.0             # how long closing waits for the engine to stop a request by itself
SIDEBAR, CENTER, PANEL = 0, 1, 2          # the splitter's parts
MIN_CHAT_WIDTH = 500                      # what the default layout leaves the chat, at 1000 px and up


class MainWindow(QMainWindow):
    requestLoad = Signal(object)
    requestServer = Signal(object)
    requestGenerate = Signal(object)
    requestFetch = Signal()
    requestDrop = Signal(int, object)
    requestShutdown = Signal()
    requestCompare = Signal(int, object)

    def __init__(self, history_path: str | None = None, settings_path: str | None = None):
        super().__init__()
        self.setWindowTitle("Tandem")
        self.settings = SettingsFile(settings_path)
        self.store = HistoryStore(history_path)
        self.current_id: int | None = None
        self.loaded: LoadedPair | None = None
        self.lost_pair: tuple[str, str | None] | None = None   # the pair the engine had when it died
        self.pending_text = ""                  # a message sent but not yet stored: it stays in the box
        self._settings_warned = False
        self.busy = False
        self.editing = False
        self._closing = False
        self.compare_dialog: CompareDialog | None = None

        # the worker and its thread
        self.thread = QThread(self)
        self.thread.setObjectName("engine")
        self.worker = EngineWorker(str(self.store.path))
        self.worker.moveToThread(self.thread)
        self.requestLoad.connect(self.worker.load)
        self.requestServer.connect(self.worker.connect_server)
        self.requestGenerate.connect(self.worker.generate)
        self.requestFetch.connect(self.worker.fetch_demo)
        self.requestDrop.connect(self.worker.drop_oldest_turns)
        self.requestCompare.connect(self.worker.compare)
        self.requestShutdown.connect(self.worker.shutdown, Qt.BlockingQueuedConnection)
        w = self.worker
        # every slot below is a method of this window, so Qt queues the calls onto the UI thread
        w.loadProgress.connect(self._on_load_progress)
        w.loaded.connect(self._on_loaded)
        w.loadFailed.connect(self._on_load_failed)
        w.fetchProgress.connect(self._on_fetch_progress)
        w.fetched.connect(self._on_fetched)
        w.fetchFailed.connect(self._on_fetch_failed)
        w.generationStarted.connect(self._on_generation_started)
        w.token.connect(self._on_token)
        w.round.connect(self._on_round)
        w.finished.connect(self._on_finished)
        w.generationFailed.connect(self._on_generation_failed)
        w.contextOverflow.connect(self._on_overflow)
        w.busyChanged.connect(self._on_busy)
        w.engineDied.connect(self._on_engine_died)
        w.requestRefused.connect(self._on_request_refused)
        w.messageStored.connect(self._on_message_stored)
        w.compareProgress.connect(self._on_compare_progress)
        w.compared.connect(self._on_compared)
        w.compareFailed.connect(self._on_compare_failed)
        self.thread.start()

        self._build()
        self._actions()
        self._view_menu()
        self._layout_actions()
        self._restore_layout()
        self.refresh_models()
        self.refresh_conversations()
        notices = [n for n in (self.settings.notice, self.store.notice) if n]
        if notices:
            self.banner.show_message(" ".join(notices))

    @property
    def generating_id(self) -> int | None:
        """The conversation a reply is being generated for (None: none)."""
        return self.reply.conversation_id

    @property
    def live_text(self) -> str:
        """The text of the reply being generated, so far."""
        return self.reply.text

    # -- construction
    def _build(self) -> None:
        self.sidebar = ConversationList()
        self.sidebar.selected.connect(self.open_conversation)
        self.sidebar.newRequested.connect(self.new_conversation)
        self.sidebar.renamed.connect(self._rename)
        self.sidebar.deleted.connect(self._delete)
        self.sidebar.searchChanged.connect(lambda _t: self.refresh_conversations())

        self.model_bar = ModelBar()
        self.model_bar.loadRequested.connect(self.load_pair)
        self.model_bar.serverRequested.connect(self.connect_server)
        self.model_bar.demoRequested.connect(self.load_demo)
        self.model_bar.cancelRequested.connect(self.worker.cancel)
        self.model_bar.folderAdded.connect(self.add_model_folder)
        self.banner = Banner()
        self.first_run = FirstRun()
        self.first_run.fetchRequested.connect(self.load_demo)
        self.first_run.pickRequested.connect(self.model_bar.browse_target)
        self.first_run.loadRequested.connect(self.load_pair)
        self.chat = ChatView()
        self.chat.setObjectName("chatView")
        self.chat.showRounds.connect(self._show_rounds)
        self.stack = QStackedWidget()
        self.stack.addWidget(self.first_run)
        self.stack.addWidget(self.chat)

        self.composer = Composer()
        self.composer.setObjectName("composer")
        self.composer.submitted.connect(self.submit)
        self.send_button = QPushButton("Send")
        self.send_button.setToolTip("Send (Enter) / Stop (Esc)")
        self.send_button.setObjectName("sendButton")
        self.send_button.clicked.connect(self._send_or_stop)
        self.regenerate_button = QPushButton("Regenerate")
        self.regenerate_button.setObjectName("regenerateButton")
        self.regenerate_button.clicked.connect(self.regenerate)
        self.edit_button = QPushButton("Edit last")
        self.edit_button.clicked.connect(self.edit_last)
        self.compare_button = QPushButton("Compare")
        self.compare_button.setObjectName("compareButton")
        self.compare_button.setToolTip("Answer the last message again with speculation off and on, side by side "
                                       "(Ctrl+Shift+K); nothing is stored")
        self.compare_button.clicked.connect(self.compare)
        buttons = QVBoxLayout()
        for b in (self.send_button, self.regenerate_button, self.compare_button, self.edit_button):
            buttons.addWidget(b)
        composer_row = QHBoxLayout()
        composer_row.addWidget(self.composer, 1)
        composer_row.addLayout(buttons)

        center = QWidget()
        v = QVBoxLayout(center)
        v.setContentsMargins(0, 0, 0, 0)
        v.addWidget(self.model_bar)
        self.spec_bar = SpecBar(self.settings["generation"])
        self.spec_bar.changed.connect(self._on_spec_changed)
        v.addWidget(self.spec_bar)
        v.addWidget(self.banner)
        v.addWidget(self.stack, 1)
        v.addLayout(composer_row)

        self.spec_panel = SpecPanel()
        self.reply = LiveReply(self.chat, self.spec_panel, self.spec_bar)
        self.settings_panel = SettingsPanel(self.settings["generation"], self.settings["loading"])
        self.settings_panel.reloadRequested.connect(self._reload_with)
        self.settings_panel.systemPromptEdited.connect(self._system_prompt_edited)
        self.tabs = QTabWidget()
        self.tabs.addTab(self.spec_panel, "Speculation")
        settings_scroll = QScrollArea()          # the settings scroll in a short window, never squeeze
        settings_scroll.setWidgetResizable(True)
        settings_scroll.setFrameShape(QScrollArea.NoFrame)
        settings_scroll.setWidget(self.settings_panel)
        self.tabs.addTab(settings_scroll, "Settings")
        self.tabs.setMinimumWidth(300)           # what a page asks for beyond this is its own to fit, never
                                                 # a reason for the window to outgrow the screen

        # conversations | chat | panel: the sides fold away (View menu, or dragging the handle to the
        # edge), the chat never does; sizes and what is folded are kept in the settings' "window"
        self.splitter = QSplitter(Qt.Horizontal)
        self.splitter.setObjectName("mainSplitter")
        self.splitter.addWidget(self.sidebar)
        self.splitter.addWidget(center)
        self.splitter.addWidget(self.tabs)
        self.splitter.setStretchFactor(CENTER, 1)
        self.splitter.setCollapsible(CENTER, False)
        self.splitter.splitterMoved.connect(self._splitter_moved)
        self.setCentralWidget(self.splitter)
        self.resize(self._default_size())
        self.splitter.setSizes(self._default_sizes(self.width()))
        self._side_widths = {SIDEBAR: self.splitter.sizes()[SIDEBAR], PANEL: self.splitter.sizes()[PANEL]}
        self._default_layout = True        # until the splitter is moved or restored: defaults follow the width
        self._update_buttons()

    def _actions(self) -> None:
        actions = {}
        for text, keys, slot in (
                ("New conversation", QKeySequence.New, self.new_conversation),
                ("Search", QKeySequence.Find, lambda: self.sidebar.search.setFocus()),
                ("Stop", Qt.Key_Escape, self.stop),
                ("Regenerate", "Ctrl+R", self.regenerate),
                ("Edit last message", "Ctrl+E", self.edit_last),
                ("Copy last reply", "Ctrl+Shift+C", self.copy_last_reply),
                ("Compare with and without speculation", "Ctrl+Shift+K", self.compare),
                ("Focus composer", "Ctrl+L", lambda: self.composer.setFocus()),
                ("Open target model…", QKeySequence.Open, self.model_bar.browse_target),
                ("Rename conversation", "F2", self.sidebar.rename_current),
                ("About Tandem and this system…", QKeySequence.HelpContents, self.show_system),
                ("Quit", QKeySequence.Quit, self.close)):
            action = actions[text] = QAction(text, self)
            action.setShortcut(QKeySequence(keys))
            action.triggered.connect(slot)
            self.addAction(action)
        self.addActions(self.spec_bar.actions_list)
        self.compare_action = actions["Compare with and without speculation"]
        self._update_buttons()
        menus = self.menuBar()
        for title, names in (("&File", ("New conversation", "Open target model…", None, "Quit")),
                             ("&Chat", ("Regenerate", "Edit last message", "Copy last reply", None,
                                        "Compare with and without speculation")),
                             ("&Help", ("About Tandem and this system…",))):
            menu = menus.addMenu(title)
            for name in names:
                if name:
                    menu.addAction(actions[name])
                else:
                    menu.addSeparator()
        speculation = QMenu("&Speculation", self)          # the speculation bar's shortcuts, before Help
        speculation.addActions(self.spec_bar.actions_list)
        menus.insertMenu(menu.menuAction(), speculation)

    def _view_menu(self) -> None:
        """View ▸ Highlight token origins (Ctrl+Shift+H), remembered in the window settings."""
        menus = self.menuBar()
        view = next((a.menu() for a in menus.actions() if a.menu() and a.text() == "&View"), None)
        if view is None:
            view = QMenu("&View", self)
            help_menu = next((a for a in menus.actions() if a.text() == "&Help"), None)
            if help_menu:
                menus.insertMenu(help_menu, view)
            else:
                menus.addMenu(view)
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
        menus = self.menuBar()
        view = next((a.menu() for a in menus.actions() if a.menu() and a.text() == "&View"), None)
        if view is None:
            view = QMenu("&View", self)
            help_menu = next((a for a in menus.actions() if a.text() == "&Help"), None)
            menus.insertMenu(help_menu, view) if help_menu else menus.addMenu(view)
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
        """Unfold (at its last width) or fold away the conversations or the panel; the chat takes the rest."""
        sizes = self.splitter.sizes()
        if show != (sizes[index] > 0):
            self._default_layout = False
            if show:
                width = self._side_widths.get(index) or self._default_sizes(self.width())[index]
                width = max(width, self.splitter.widget(index).minimumSizeHint().width())
                sizes[index], sizes[CENTER] = width, max(sizes[CENTER] - width, 1)
            else:
                self._side_widths[index] = sizes[index]
                sizes[index], sizes[CENTER] = 0, sizes[CENTER] + sizes[index]
            self.splitter.setSizes(sizes)
        self._sync_layout_actions()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        if self._default_layout:
            self.splitter.setSizes(self._default_sizes(self.splitter.width()))

    def _splitter_moved(self, *_args) -> None:
        self._default_layout = False
        self._sync_layout_actions()

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

    def show_system(self) -> SystemDialog:
        """Versions, the llama.cpp build and its CPU features, the weight-repacking decision and the
        folders: what a bug report needs, gathered by `tandem doctor` in a child process."""
        dialog = SystemDialog(self)
        dialog.setAttribute(Qt.WA_DeleteOnClose)
        dialog.open()
        return dialog

    def _restore_layout(self) -> None:
        window = self.settings["window"]
        if window.get("geometry"):
            self.restoreGeometry(QByteArray.fromBase64(window["geometry"].encode()))
        if window.get("splitter"):
            self._default_layout = not self.splitter.restoreState(QByteArray.fromBase64(window["splitter"].encode()))
        self._sync_layout_actions()

    # -- models
    def refresh_models(self) -> None:
        demo = [models.inspect(m) for m in models.resolve(["demo"])]
        files = [str(p) for p in find_gguf_files(self.settings["model_folders"])]
        self.model_bar.set_choices(files, self.settings["recent_pairs"], all(d.verified for d in demo))
        self.model_bar.select(self.settings["last_target"], self.settings["last_draft"])
        if not self.loaded:
            self._offer_models(files, demo)
        self.stack.setCurrentWidget(self.chat if self.loaded else self.first_run)

    def _offer_models(self, files: list[str], demo: list) -> None:
        """The first-run page offers to load what is here: the demo pair when cached and verified, else
        the best pair among the files found (the larger model as the target), preselected in the bar."""
        last = self.settings["last_target"]
        if last and os.path.exists(last):
            self.first_run.offer(last, self.model_bar.draft_path())
            return
        if demo and all(d.verified for d in demo):
            choice, is_demo = (demo[0].path, demo[1].path if len(demo) > 1 else None), True
        else:
            choice, is_demo = suggest_pair(files), False
        if choice and self.first_run.offered is None:      # (later, the bar keeps what the user chose)
            self.model_bar.select(*choice)
        self.first_run.offer(*(choice or (None, None)), demo=is_demo)

    def add_model_folder(self, folder: str) -> None:
        if folder not in self.settings["model_folders"]:
            self.settings["model_folders"].append(folder)
            self._say(self._save_settings())
        self.refresh_models()

    def load_pair(self, target: str, draft: str | None) -> None:
        t_opts, d_opts = load_options(self.settings_panel.loading())
        if self.model_bar.backend.backend() == "rpc":
            try:
                t_opts, d_opts = rpc_options(self.model_bar.rpc_servers(), t_opts, d_opts)
            except RpcError as exc:
                self.model_bar.show_error(f"RPC servers: {exc}")
                return
            self._say(f"Loading onto the RPC servers {', '.join(t_opts.rpc_servers)}. {RPC_WARNING}")
        self.model_bar.select(target, draft)
        self.model_bar.show_progress("Loading", 0.0)
        self.requestLoad.emit(LoadRequest(target, draft, t_opts, d_opts))

    def connect_server(self, url: str, api_key: str) -> None:
        self.model_bar.show_progress(f"Connecting to {url}", 0.0)
        self.requestServer.emit(ServerRequest(url, api_key))

    def _on_load_progress(self, what: str, fraction: float) -> None:
        label = STAGES.get(what, f"loading {what}")
        self.model_bar.show_progress(label[:1].upper() + label[1:], fraction)

    def load_demo(self) -> None:
        demo = models.resolve(["demo"])
        if all(models.inspect(m).verified for m in demo):
            self.load_pair(*(str(models.model_path(m)) for m in demo))
            return
        self.first_run.fetch_button.setEnabled(False)
        self.first_run.progress.show()
        self.model_bar.show_progress("Fetching the demo pair", 0.0)
        self.requestFetch.emit()

    def _on_fetch_progress(self, p) -> None:
        demo = models.resolve(["demo"])                  # fetched in this order: bytes before = earlier files
        done_before = sum(m.size for m in demo[:[m.key for m in demo].index(p.model)])
        fraction = (done_before + p.done_bytes) / sum(m.size for m in demo)
        self.first_run.progress.setValue(int(1000 * fraction))
        self.model_bar.show_progress(f"Fetching {p.model}", fraction)

    def _on_fetched(self, target: str, draft: str) -> None:
        if self._closing:          # already-queued worker signals after close
            return
        self.first_run.progress.hide()
        self.first_run.fetch_button.setEnabled(True)
        self.load_pair(target, draft)

    def _on_fetch_failed(self, message: str) -> None:
        self.first_run.progress.hide()
        self.first_run.fetch_button.setEnabled(True)
        self.model_bar.show_error(f"Fetching the demo pair failed: {message}")

    def _on_loaded(self, info: LoadedPair) -> None:
        if self._closing:          # already-queued worker signals after close
            return
        self.loaded = info
        self.lost_pair = None
        if info.server is not None:                      # a llama-server: its own models and speculation
            unsaved = ""
            names = f"{os.path.basename(info.server.model)} (llama-server)"
            self.model_bar.show_loaded(f"Connected: {info.target_summary}." + (
                "" if info.server.metrics else " Start it with --metrics for acceptance per draft position."))
            self.spec_bar.set_remote(info.server.speculation(), info.server.command_hint())
        else:
            self.settings.remember_pair(info.target, info.draft)
            unsaved = self._save_settings()
            names = os.path.basename(info.target) + (f" + {os.path.basename(info.draft)}" if info.draft else "")
            self.model_bar.show_loaded(f"Loaded {names} (context {info.n_ctx} tokens)."
                                       + (f" Note: {info.template_note}." if info.template_note else ""))
            self.spec_bar.set_remote(None)
        self.settings_panel.template_note.setText(info.template_note)
        self.spec_bar.set_draft_available(bool(info.draft))
        self._say(" ".join(n for n in (info.notice, unsaved) if n))
        self.setWindowTitle(f"Tandem — {names}")
        self.refresh_models()
        self.stack.setCurrentWidget(self.chat)
        self._update_buttons()

    def _on_load_failed(self, message: str) -> None:
        if self._closing:          # already-queued worker signals after close
            return
        still = (f" Still using {os.path.basename(self.loaded.target)}"
                 + (f" + {os.path.basename(self.loaded.draft)}" if self.loaded.draft else "") + "."
                 ) if self.loaded else ""
        self.model_bar.show_error(f"Could not load: {message}.{still}")
        if self.loaded:
            self.model_bar.select(self.loaded.target, self.loaded.draft)

    def _reload_with(self, loading: dict) -> None:
        self.settings.data["loading"] = loading
        self._say(self._save_settings())
        pair = (self.loaded.target, self.loaded.draft) if self.loaded else self.lost_pair
        if pair and pair[0]:
            self.load_pair(*pair)

    # -- conversations
    def _save_settings(self) -> str:
        """Save the settings; the reason they could not be, the first time only ("" otherwise)."""
        if self.settings.save() or self._settings_warned:
            return ""
        self._settings_warned = True
        return self.settings.save_error

    def _say(self, message: str) -> None:
        if message:
            self.banner.show_message(message)

    def _history(self, call, *args, default=None):
        """A history call from the window: a failure (a full disk, a damaged or busy file) is a message
        in the window, saying what failed and why, and the window goes on."""
        try:
            return call(*args)
        except HistoryError as exc:
            self.banner.show_message(f"{exc}.")
            return default

    def refresh_conversations(self) -> None:
        query = self.sidebar.search.text().strip()
        conversations = (self._history(self.store.search, query, default=[]) if query
                         else self._history(self.store.list_conversations, default=[]))
        self.sidebar.set_conversations(conversations, self.current_id)

    def new_conversation(self) -> None:
        cid = self._history(self.store.create_conversation, DEFAULT_TITLE, self.settings["generation"]["system_prompt"])
        if cid is None:
            return
        self.current_id = cid
        self.spec_panel.clear()
        self.sidebar.search.clear()
        self.refresh_conversations()
        self.open_conversation(self.current_id)
        self.composer.setFocus()

    def open_conversation(self, conversation_id: int) -> None:
        if conversation_id != self.current_id:      # another conversation: the panel shows none of its
            if conversation_id == self.generating_id:   # replies, except the one generating now
                self.spec_panel.show_live()
            else:
                self.spec_panel.clear()
        self.current_id = conversation_id
        self.chat.clear()
        try:
            conversation = self.store.conversation(conversation_id)
        except (KeyError, HistoryError) as exc:
            if isinstance(exc, HistoryError):
                self.banner.show_message(f"{exc}.")
            self.current_id = None
            self._update_buttons()
            return
        self.settings_panel.system_prompt.blockSignals(True)
        self.settings_panel.system_prompt.setPlainText(conversation.system_prompt)
        self.settings_panel.system_prompt.blockSignals(False)
        messages = conversation.messages
        live = self.generating_id == conversation_id
        if live and messages and messages[-1].role == "assistant":
            messages = messages[:-1]
        for m in messages:
            self.chat.add_message(m.role, m.content, m.status, m.id, bool(m.rounds), stats=m.stats,
                                  settings=m.settings, rounds=m.rounds)
        if live:
            self.chat.begin_reply().set_text(self.live_text)
        if self.stack.currentWidget() is not self.chat and self.loaded:
            self.stack.setCurrentWidget(self.chat)
        self._update_buttons()

    def _rename(self, conversation_id: int, title: str) -> None:
        self._history(self.store.rename, conversation_id, title)
        self.refresh_conversations()

    def _delete(self, conversation_id: int) -> None:
        if conversation_id == self.generating_id:
            self.banner.show_message("Stop the reply before deleting this conversation.")
            return
        if self._history(self.store.delete_conversation, conversation_id, default=False) is False:
            return
        if conversation_id == self.current_id:
            self.current_id = None
            self.chat.clear()
            self.spec_panel.clear()
        self.refresh_conversations()
        self._update_buttons()

    def _system_prompt_edited(self, text: str) -> None:
        if self.current_id is not None:
            self._history(self.store.set_system_prompt, self.current_id, text)

    def _title(self, conversation_id: int) -> str:
        try:
            return self.store.conversation(conversation_id).title
        except (KeyError, HistoryError):
            return ""

    def _show_rounds(self, message_id: int) -> None:
        if self.current_id is None:
            return
        for n, m in enumerate(self._history(self.store.messages, self.current_id, default=[]), 1):
            if m.id == message_id:
                title = self._title(self.current_id)
                self.spec_panel.show_stored(m.rounds, m.stats, stored_header(title, m.created_at, n))
                self.tabs.setCurrentWidget(self.spec_panel)

    # -- generation
    def _options(self) -> GenerationOptions:
        has_draft = bool(self.loaded and self.loaded.draft)
        return self.settings_panel.options(self.spec_bar.spec(has_draft))

    def submit(self, text: str) -> None:
        if not self.loaded:
            if self.lost_pair:
                self.banner.show_message("The model engine stopped; reload the models to send your message "
                                         "(it stays in the box).", [("Reload the models", self.reload_lost_pair)])
            else:
                self.banner.show_message("Load a model first: fetch the demo pair or choose a GGUF file.")
            return
        if self.busy:
            if self.generating_id is None:
                self.banner.show_message("The models are loading; send your message when they are ready.")
            return
        if self.current_id is None:
            self.new_conversation()
            if self.current_id is None:         # (the history refused it, and said so)
                return
        kind = "edit" if self.editing else "send"
        self.editing = False
        self.pending_text = text                # the box is cleared once the message is stored
        if kind == "edit":                      # the edited message replaces the last one and what followed
            users = user_positions(self.chat.messages)
            self.chat.truncate(users[-1] if users else len(self.chat.messages))
            self.banner.hide()
        self.chat.add_message("user", text)
        self._start(GenerateRequest(kind, self.current_id, text, self._options()))

    def _on_message_stored(self, conversation_id: int) -> None:
        """The message is safe in the history: now the box may be emptied (unless more was typed)."""
        if self.composer.toPlainText().strip() == self.pending_text:
            self.composer.clear()
        self.pending_text = ""

    def _start(self, request: GenerateRequest) -> None:
        self.reply.start(request.conversation_id)
        self.busy = True
        self._update_buttons()
        self.requestGenerate.emit(request)

    def regenerate(self) -> None:
        if self.busy or self.current_id is None or not self.loaded:
            return
        messages = self._history(self.store.messages, self.current_id, default=[])
        if not can_regenerate(messages):
            return
        self.chat.truncate(len(self.chat.messages) - 1)
        self._start(GenerateRequest("regenerate", self.current_id, "", self._options()))

    def edit_last(self) -> None:
        if self.busy or self.current_id is None:
            return
        last = last_user_message(self._history(self.store.messages, self.current_id, default=[]))
        if last is not None:
            self.editing = True
            self.composer.setPlainText(last.content)
            self.composer.setFocus()
            self.banner.show_message("Editing your last message: Enter resends it and replaces what followed.",
                                     [("Cancel edit", self._cancel_edit)])

    def _cancel_edit(self) -> None:
        self.editing = False
        self.composer.clear()

    def stop(self) -> None:
        if self.busy:
            self.worker.cancel()

    def _send_or_stop(self) -> None:
        if self.busy:
            self.stop()
        else:
            text = self.composer.toPlainText().strip()
            if text:
                self.submit(text)

    def compare(self) -> None:
        """Answer the last user message with speculation off, then on, in the Compare dialog (nothing is
        stored; the worker is busy meanwhile, and Stop cancels it)."""
        if self.busy or self.current_id is None or not self.loaded or not self._has_user_message():
            return
        if self.compare_dialog is None:
            self.compare_dialog = CompareDialog(self)
            self.compare_dialog.stopRequested.connect(self.stop)
        self.compare_dialog.start()
        self.compare_dialog.show()
        self.compare_dialog.raise_()
        self.busy = True
        self._update_buttons()
        self.requestCompare.emit(self.current_id, self._options())

    def _has_user_message(self) -> bool:
        return last_user_message(self.chat.messages) is not None

    def _on_compare_progress(self, what: str) -> None:
        if self.compare_dialog is not None and not self._closing:
            self.compare_dialog.show_progress(what)

    def _on_compared(self, result) -> None:
        if self.compare_dialog is not None and not self._closing:
            self.compare_dialog.show_result(result)

    def _on_compare_failed(self, message: str) -> None:
        if self._closing:
            return
        if self.compare_dialog is not None:
            self.compare_dialog.show_failed(message)
        else:
            self.banner.show_message(message)

    def copy_last_reply(self) -> None:
        replies = [m for m in self.chat.messages if m.role == "assistant"]
        if replies:
            replies[-1].copy()

    def _on_spec_changed(self, generation: dict) -> None:
        self.settings.data["generation"].update(generation)
        if self.busy and self.loaded:
            self.worker.update_spec(self.spec_bar.spec(bool(self.loaded.draft)))

    def _on_generation_started(self, conversation_id: int) -> None:
        if self._closing:          # already-queued worker signals after close
            return
        self.refresh_conversations()          # a first message names the conversation
        self.reply.began(conversation_id, self.current_id, self._title(conversation_id))

    def _on_token(self, event: TokenEvent) -> None:
        if self._closing:          # already-queued worker signals after close
            return
        self.reply.token(event, self.current_id)

    def _on_round(self, event) -> None:
        if self._closing:          # already-queued worker signals after close
            return
        self.reply.round(event)

    def _on_finished(self, conversation_id: int, event: FinishEvent) -> None:
        if self._closing:          # already-queued worker signals after close
            return
        self.spec_panel.finish(event.stats)
        if self.loaded is not None and self.loaded.server is not None:      # it now knows more of itself
            self.spec_bar.set_remote(self.loaded.server.speculation(), self.loaded.server.command_hint())
        if conversation_id == self.current_id:
            stored = self._history(self.store.messages, conversation_id, default=[])
            last = stored[-1] if stored else None
            self.chat.end_reply(event.text, last.status if last else reply_status(event.stop_reason),
                                last.id if last else None, bool(last and last.rounds),
                                event.stats, last.settings if last else None)
        if event.message:
            self.banner.show_message(event.message)
        self.reply.end()

    def _on_generation_failed(self, conversation_id: int, message: str) -> None:
        if self._closing:          # already-queued worker signals after close
            return
        self.reply.end()
        self.banner.show_message(message)
        if conversation_id == self.current_id:
            self.open_conversation(conversation_id)

    def _on_engine_died(self, conversation_id: int, message: str) -> None:
        """The engine process died: the window and the conversation stay, the partial reply is saved as
        interrupted, and one click loads the models again in a new engine process."""
        if self._closing:          # already-queued worker signals after close
            return
        if self.loaded is not None:
            self.lost_pair = (self.loaded.target, self.loaded.draft)
        elif self.lost_pair is None:
            self.lost_pair = (self.model_bar.target_path(), self.model_bar.draft_path())
        self.reply.interrupt("Interrupted: the model engine stopped before this reply was finished.")
        self.loaded = None
        self.reply.end()
        self.busy = False                       # (what was running has ended with the engine)
        self.setWindowTitle("Tandem")
        self.model_bar.show_error("The model engine stopped. The models need loading again.")
        if self.lost_pair and self.lost_pair[0]:
            self.banner.show_message(message, [("Reload the models", self.reload_lost_pair)])
        else:
            self.banner.show_message(message)
        if conversation_id == self.current_id and conversation_id >= 0:
            self.open_conversation(conversation_id)
        self._update_buttons()

    def _on_request_refused(self, request: GenerateRequest, message: str) -> None:
        """A message that reached the worker after the engine died: it was not stored, so it goes back
        in the box, and the view shows the conversation as stored."""
        if self._closing:
            return
        self.reply.end()
        if request.text and not self.composer.toPlainText().strip():
            self.composer.setPlainText(request.text)
            self.editing = request.kind == "edit"
        if request.conversation_id == self.current_id:
            self.open_conversation(request.conversation_id)
        actions = [("Reload the models", self.reload_lost_pair)] if self.lost_pair and self.lost_pair[0] else []
        self.banner.show_message(message, actions)
        self._update_buttons()

    def reload_lost_pair(self) -> None:
        if self.lost_pair and self.lost_pair[0]:
            self.load_pair(*self.lost_pair)

    def _on_overflow(self, conversation_id: int, message: str, can_drop: bool) -> None:
        if self._closing:          # already-queued worker signals after close
            return
        self.reply.end()
        actions = [("New conversation", self.new_conversation)]
        if can_drop:
            actions.insert(0, ("Leave out oldest turns",
                               lambda: self._drop_and_retry(conversation_id)))
        self.banner.show_message(message, actions)
        if conversation_id == self.current_id:
            self.open_conversation(conversation_id)

    def _drop_and_retry(self, conversation_id: int) -> None:
        self.reply.start(conversation_id)
        self.busy = True
        self._update_buttons()
        self.requestDrop.emit(conversation_id, self._options())

    def _on_busy(self, busy: bool) -> None:
        if self._closing:          # already-queued worker signals after close
            return
        self.busy = busy
        self._update_buttons()

    def _update_buttons(self) -> None:
        ready = self.loaded is not None
        self.send_button.setText("Stop" if self.busy and self.generating_id is not None else "Send")
        self.send_button.setEnabled(ready or bool(self.lost_pair))       # (after a crash: says how to go on)
        self.regenerate_button.setEnabled(ready and not self.busy and self.current_id is not None)
        self.edit_button.setEnabled(ready and not self.busy and self.current_id is not None)
        can_compare = ready and not self.busy and self.current_id is not None and self._has_user_message()
        self.compare_button.setEnabled(can_compare)
        if hasattr(self, "compare_action"):
            self.compare_action.setEnabled(can_compare)

    # -- closing
    def closeEvent(self, event) -> None:
        if self._closing:
            event.accept()
            return
        self._closing = True
        self.settings.data["window"].update({"geometry": bytes(self.saveGeometry().toBase64()).decode(),
                                             "splitter": bytes(self.splitter.saveState().toBase64()).decode()})
        self.settings.data["generation"].update(self.settings_panel.generation())
        self.settings.data["generation"].update(self.spec_bar.generation())
        self.settings.data["loading"] = self.settings_panel.loading()
        self.settings.save()                 # (a failure was told when it first happened)
        self.worker.blockSignals(True)       # nothing more for this window
        self.worker.cancel()                 # a running reply stops within one round and is saved
        # An engine stuck in native code (a driver hang, the first-run CPU check) would hold the worker,
        # and the window, forever: past a few seconds it is killed, and the worker's request ends.
        stuck = threading.Timer(CLOSE_GRACE_S, self.worker.engine.kill)
        stuck.start()
        self.requestShutdown.emit()          # waits until the worker has finished and freed the models
        stuck.cancel()
        self.thread.quit()
        self.thread.wait()
        self.store.close()
        event.accept()
