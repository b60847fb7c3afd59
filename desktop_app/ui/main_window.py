"""The main window: conversations on the left, the chat in the middle, speculation and settings on
the right. All model work goes through the one EngineWorker on its own thread."""
from __future__ import annotations

import threading
import time

from PySide6.QtCore import Qt, QThread, Signal
from PySide6.QtWidgets import (QGridLayout, QHBoxLayout, QMainWindow, QPushButton, QSplitter,
                               QStackedWidget, QVBoxLayout, QWidget)

from desktop_app.chat.history import HistoryError, HistoryStore
from desktop_app.chat.rules import can_regenerate, last_user_message, reply_status, user_positions
from desktop_app.chat.session import GenerationOptions
from desktop_app.chat.settings_file import SettingsFile
from desktop_app.engine.events import FinishEvent, TokenEvent
from desktop_app.ui.banner import Banner
from desktop_app.ui.chat_view import ChatView
from desktop_app.ui.compare_dialog import CompareDialog
from desktop_app.ui.composer import Composer
from desktop_app.ui.conversation_list import ConversationList
from desktop_app.ui.first_run import FirstRun
from desktop_app.ui.live_reply import LiveReply
from desktop_app.ui.model_bar import ModelBar
from desktop_app.ui.reply_versions import REGENERATE_TIP
from desktop_app.ui.settings_panel import SettingsPanel
from desktop_app.ui.spec_bar import SpecBar
from desktop_app.ui.spec_panel import SpecPanel
from desktop_app.ui.window_conversations import ConversationsMixin, Draft
from desktop_app.ui.window_faults import FaultsMixin
from desktop_app.ui.window_files import FilesMixin
from desktop_app.ui.window_layout import CENTER, PANEL, SIDEBAR, LayoutMixin, side_tabs
from desktop_app.ui.window_models import ModelsMixin
from desktop_app.ui.window_replies import RepliesMixin
from desktop_app.ui.worker import EngineWorker, GenerateRequest, LoadedPair

CLOSE_GRACE_S = 3.0             # how long closing waits for the engine to stop a request by itself


class MainWindow(LayoutMixin, ModelsMixin, ConversationsMixin, RepliesMixin, FaultsMixin, FilesMixin, QMainWindow):
    requestLoad = Signal(object)
    requestServer = Signal(object)
    requestGenerate = Signal(object)
    requestFetch = Signal()
    requestDrop = Signal(int, object, str)
    requestShutdown = Signal()
    requestCompare = Signal(int, object)

    def __init__(self, history_path: str | None = None, settings_path: str | None = None):
        super().__init__()
        self.setWindowTitle("Tandem")
        self.settings = SettingsFile(settings_path)
        self.store = HistoryStore(history_path)
        self.current_id: int | None = None
        self._loaded: LoadedPair | None = None  # (self.loaded: ModelsMixin)
        self.lost_pair: tuple[str, str | None] | None = None   # the pair the engine had when it died
        self.pending_text = ""                  # a message sent but not yet stored: it stays in the box
        self.pending_edit = False               # ... and it was an edit of the last one (read with pending_text)
        self._loads = 0                         # fetches, loads and connections not yet ended (ModelsMixin)
        self.queued: tuple[int | None, bool, str] | None = None   # a message sent meanwhile (queue_message)
        self.queued_reply_at: float | None = None   # ... sent then: its reply's start (stop_came_late)
        self.not_loaded_note: tuple[str, str] | None = None   # (message, banner) of the last _say_not_loaded
        self._settings_warned = self._closing = False
        self.busy = self.editing = False
        self.edit_original = ""                 # the message being edited, as it was (ConversationsMixin)
        self.drafts: dict[int, Draft] = {}          # what was typed in other conversations' boxes (the same)
        self.opened_here: set[int | None] = set()   # the conversations this window has opened (the same), and
        self.started_at = time.time()               # when it started: another window's are that window's
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
        w.prompt.connect(self._on_prompt)
        w.finished.connect(self._on_finished)
        w.generationFailed.connect(self._on_generation_failed)
        w.contextOverflow.connect(self._on_overflow)
        w.busyChanged.connect(self._on_busy)
        w.engineDied.connect(self._on_engine_died)
        w.modelsReleased.connect(self._on_models_released)
        w.requestRefused.connect(self._on_request_refused)
        w.messageStored.connect(self._on_message_stored)
        w.compareProgress.connect(self._on_compare_progress)
        w.compareRunDone.connect(self._on_compare_run)      # (a method: a lambda would run on the worker's thread)
        w.compared.connect(self._on_compared)
        w.compareFailed.connect(self._on_compare_failed)
        self.thread.start()

        self._build()
        self._actions()
        self._view_menu()
        self._layout_actions()
        self._restore_layout()
        self._autosave()
        self.refresh_models()
        self.refresh_conversations()
        self.read_unsent()
        self.composer.setFocus()                # (typing went into the search box: a new user's try)
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
        self.sidebar.selected.connect(self._choose_conversation)
        self.sidebar.newRequested.connect(self.new_conversation)
        self.sidebar.renamed.connect(self._rename)
        self.sidebar.deleteRequested.connect(self._ask_delete)
        self.sidebar.searchChanged.connect(lambda _t: self.refresh_conversations())

        self.model_bar = ModelBar()
        self.model_bar.loadRequested.connect(self.load_pair)
        self.model_bar.serverRequested.connect(self.connect_server)
        self.model_bar.demoRequested.connect(self.load_demo)
        # (direct: a queued call would wait for the worker's thread, busy with the very load it cancels)
        self.model_bar.cancelRequested.connect(self.worker.cancel_load, Qt.DirectConnection)
        self.model_bar.folderAdded.connect(self.add_model_folder)
        self.model_bar.folderRemoved.connect(self.remove_model_folder)
        self.model_bar.choiceChanged.connect(self._choice_changed)
        self.model_bar.userChose.connect(self._offer_bar_choice)
        self.banner = Banner()
        self.banner.hidden.connect(self._edit_note_again)     # (while editing, the banner says so)
        self.first_run = FirstRun()
        self.first_run.fetchRequested.connect(self.load_demo)
        self.first_run.pickRequested.connect(self.model_bar.browse_target)
        self.first_run.loadRequested.connect(self.load_pair)
        self.chat = ChatView()
        self.chat.setObjectName("chatView")
        self.chat.showRounds.connect(self._show_rounds)
        self.chat.versionStep.connect(self._step_version)
        self.chat.continueRequested.connect(self.continue_reply)
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
        self.regenerate_button = QPushButton("Regenerate", objectName="regenerateButton", toolTip=REGENERATE_TIP)
        self.regenerate_button.clicked.connect(self.regenerate)
        self.edit_button = QPushButton("Edit last")
        self.edit_button.clicked.connect(self.edit_last)
        self.compare_button = QPushButton("Compare")
        self.compare_button.setObjectName("compareButton")
        self.compare_button.setToolTip("Answer the last message again with speculation off and on, side by side "
                                       "(Ctrl+Shift+K); nothing is stored")
        self.compare_button.clicked.connect(self.compare)
        buttons = QGridLayout()         # two by two: stacked, four buttons made the composer 130 px tall,
        for i, b in enumerate((self.send_button, self.regenerate_button, self.compare_button,   # which the
                               self.edit_button)):                # chat lost at 1000×700 (a user's try)
            buttons.addWidget(b, i // 2, i % 2)
            b.setFocusPolicy(Qt.TabFocus)       # a click leaves the focus in the box (typing went nowhere)
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
        self.tabs = side_tabs({"Speculation": self.spec_panel, "Settings": self.settings_panel})
        self.spec_scroll, self.settings_scroll = self.tabs.widget(0), self.tabs.widget(1)
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

    # -- generation
    def _options(self) -> GenerationOptions:
        has_draft = bool(self.loaded and self.loaded.draft)
        return self.settings_panel.options(self.spec_bar.spec(has_draft))

    def submit(self, text: str) -> None:
        if self.loading:                        # sent once the models are ready (it stays in the box)
            self.queue_message(text)
            return
        if not self.loaded:
            self._say_not_loaded(text)
            return
        if self.busy:
            self.wait_for_the_run(text)
            return
        if self.current_id is None:
            self.new_conversation()
            if self.current_id is None:         # (the history refused it, and said so)
                return
        kind = "edit" if self.editing else "send"
        self.editing = False
        self.pending_text = text                # the box is cleared once the message is stored
        self.pending_edit = kind == "edit"      # (an edit the context cannot hold is not stored: _on_overflow)
        if kind == "edit":                      # the edited message replaces the last one and what followed
            users = user_positions(self.chat.messages)
            self.chat.truncate(users[-1] if users else len(self.chat.messages))
        if self.banner.about == self.current_id:    # what it said of this conversation is past (an edit
            self.banner.hide()                      # under way; a message too long, now shortened)
        self.chat.add_message("user", text)
        self._start(GenerateRequest(kind, self.current_id, text, self._options()))

    def _start(self, request: GenerateRequest, continuing=None) -> None:
        """Ask the worker for `request`'s reply; `continuing`: the reply it writes on (LiveReply.start's)."""
        self.reply.start(request.conversation_id, continuing)
        self.busy = True
        self._update_buttons()
        self.requestGenerate.emit(request)

    def stop(self) -> bool:
        """Stop the reply or compare running (Esc, Stop): not a load, which the model bar's Cancel stops.
        Whether there was one."""
        comparing = self.compare_dialog is not None and self.compare_dialog.running
        if self.busy and (self.generating_id is not None or comparing):
            if comparing or not self.stop_came_late():
                self.cancel_run(comparing)
            return True
        return False

    def _send_or_stop(self) -> None:
        if self.busy and self.generating_id is not None and self.generating_id == self.current_id:
            self.stop()
        else:
            text = self.composer.toPlainText().strip()
            if text:
                self.submit(text)

    def compare(self) -> None:
        """Answer the last user message with speculation off, then on, in the Compare dialog (nothing is
        stored; the worker is busy meanwhile, and Stop cancels it)."""
        if self.busy or self.editing or self.current_id is None or not self.loaded or not self._has_user_message():
            return
        if self.compare_dialog is None:
            self.compare_dialog = CompareDialog(self)
            self.compare_dialog.stopRequested.connect(self.stop)
        options = self._options()
        self.compare_dialog.start(off_in_chat=not options.spec.speculating)
        self.compare_dialog.show()
        self.compare_dialog.raise_()
        self.busy = True
        self._update_buttons()
        self.requestCompare.emit(self.current_id, options)

    def _has_user_message(self) -> bool:
        return last_user_message(self.chat.messages) is not None

    def _on_compare_progress(self, what: str) -> None:
        if self.compare_dialog is not None and not self._closing:
            self.compare_dialog.show_progress(what)

    def _on_compare_run(self, run) -> None:
        if self.compare_dialog is not None and not self._closing:
            self.compare_dialog.show_run(run)

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

    def _on_prompt(self, event) -> None:
        if not self._closing:      # (already-queued worker signals after close)
            self.reply.prompt(event, self.current_id)

    def _on_finished(self, conversation_id: int, event: FinishEvent) -> None:
        if self._closing:          # already-queued worker signals after close
            return
        stored = self._history(self.store.messages, conversation_id, default=[])
        self.spec_panel.finish(event.stats, event.end_after_rounds, event.broke_off, len(stored) or None)
        if self.loaded is not None and self.loaded.server is not None:      # it now knows more of itself
            self.spec_bar.set_remote(self.loaded.server.speculation(), self.loaded.server.command_hint())
        if conversation_id == self.current_id:
            last = stored[-1] if stored else None
            self.chat.end_reply(event.text, last.status if last else reply_status(event.stop_reason, event.broke_off),
                                last.id if last else None, bool(last and last.rounds),
                                last.stats if last else event.stats, last.settings if last else None)
            self.mark_left_out(conversation_id)         # (turns left out for this reply: the line moves)
            if self.reply.continuing is not None:       # (as stored: a run that added nothing left it as it was)
                self._show_last_reply(conversation_id, self._title(conversation_id), stored)
        self._say_why_it_ended(event, conversation_id)
        self.reply.end()
        self.model_bar.error_is_past()

    def _on_busy(self, busy: bool) -> None:
        if self._closing:          # already-queued worker signals after close
            return
        self.busy = busy
        last = self.chat.messages[-1] if self.chat.messages else None
        if not busy and last is not None and last.role == "assistant" and not last.text and self.current_id:
            self.open_conversation(self.current_id)   # (a regenerate that wrote nothing gave its place back)
        self._update_buttons()
        if not busy and not self.loading:             # a message sent meanwhile (submit)
            self.send_queued()

    def _update_buttons(self) -> None:
        ready = self.loaded is not None
        # (Stop where the reply is written: in another conversation it stopped a reply out of sight)
        writing_here = self.busy and self.generating_id is not None and self.generating_id == self.current_id
        self.send_button.setText("Stop" if writing_here else "Send")
        # (Send stays enabled before any model is loaded: it does what Enter does, and the banner says how
        # to load one and send; greyed out, it looked as if the message could not be sent: a user's try)
        in_one = self.current_id is not None
        regen_ok = ready and in_one and can_regenerate(self.chat.messages) and not self.editing
        can_edit = in_one and self._has_user_message()
        self.regenerate_button.setEnabled(regen_ok and not self.busy)
        self.edit_button.setEnabled(can_edit and ready and not self.busy)
        self.show_versions(not self.busy)        # (a model is not needed to read them)
        can_compare = can_edit and ready and not self.busy and not self.editing
        self.compare_button.setEnabled(can_compare)
        self._update_menu(regen_ok, can_edit, can_compare, writing_here)
        self._update_continue(not self.busy)
        self.sidebar.set_writing(self.generating_id if self.busy else None)
        self.settings_panel.set_writing(self.busy and self.generating_id is not None)

    # -- closing
    def closeEvent(self, event) -> None:
        if self._closing:
            event.accept()
            return
        self.store_settings()
        self.keep_unsent()
        self._closing = True
        self.worker.blockSignals(True)       # nothing more for this window
        self.worker.cancel_load()            # a load asked for is not started,
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
