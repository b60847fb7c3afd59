"""The one worker between the window and the engine, off the UI thread.

It lives on a QThread; the window asks for work through queued signals (load, generate, fetch) and
gets every engine event back as a signal. The models themselves live in the engine process
(`engine.process`): a native fault there ends that process, not the window, and the worker reports
it (`engineDied`) after the reply in progress was saved as interrupted. `cancel()`, `cancel_load()`,
`update_spec()` and `new_load()` are the methods called directly from the UI thread: they only set a
flag or send a message that the engine acts on from its next round.
"""
from __future__ import annotations

import os
import sys
import threading
import traceback
from dataclasses import dataclass

from PySide6.QtCore import QObject, Signal, Slot

from desktop_app import models
from desktop_app.chat.compare import compare as run_compare
from desktop_app.chat.history import HistoryError, HistoryStore
from desktop_app.chat.rules import can_regenerate
from desktop_app.chat.server_session import ServerChatSession
from desktop_app.chat.session import CannotContinue, ChatSession, ContextOverflow, GenerationOptions
from desktop_app.engine.errors import IncompatiblePair, LoadCancelled, ModelLoadError
from desktop_app.engine.events import FinishEvent, PromptEvent, RoundEvent, TokenEvent
from desktop_app.engine.load_options import LoadOptions
from desktop_app.engine.process.client import EngineProcess
from desktop_app.engine.process.protocol import EngineCrashed
from desktop_app.remote.server import LlamaServer, ServerError


@dataclass(frozen=True)
class LoadRequest:
    target: str
    draft: str | None
    target_options: LoadOptions
    draft_options: LoadOptions
    settings: dict | None = None   # the window's loading settings these options came from


@dataclass(frozen=True)
class LoadedPair:
    target: str
    draft: str | None
    template_note: str
    n_ctx: int
    notice: str = ""               # a decision the engine made for the user, to tell once
    settings: dict | None = None   # the loading settings of the request (LoadRequest.settings)
    server: object = None          # remote.server.ServerInfo when the models run in a llama-server
    plain_step_s: float = 0.0      # one single-token target pass as timed at load (ModelPair.plain_step_s)


CANCELLED_LOAD = "Loading was cancelled."           # the model bar's Cancel, as the window shows it
CANCELLED_CONNECT = "Connecting was cancelled."
CANCELLED_FETCH = "Fetching the demo pair was cancelled."
CANCELLED = (CANCELLED_LOAD, CANCELLED_CONNECT, CANCELLED_FETCH)
RELEASED_NOTE = "The models loaded before were let go first, to change RPC servers: load them again to go on."


@dataclass(frozen=True)
class ServerRequest:
    url: str
    api_key: str


@dataclass(frozen=True)
class GenerateRequest:
    kind: str                      # "send", "regenerate", "edit", "continue" (the last reply, written on),
                                   # "reply" (to the history as it is; its text, if any, the user's
                                   # message just stored, taken back on overflow)
    conversation_id: int
    text: str
    options: GenerationOptions


class EngineWorker(QObject):
    loadProgress = Signal(str, float)
    loaded = Signal(object)                 # LoadedPair
    loadFailed = Signal(str)
    fetchProgress = Signal(object)          # models.FetchProgress
    fetched = Signal(str, str)              # target path, draft path
    fetchFailed = Signal(str)
    generationStarted = Signal(int)         # conversation id
    token = Signal(object)                  # TokenEvent
    round = Signal(object)                  # RoundEvent
    prompt = Signal(object)                 # PromptEvent: how far a long prompt has been read
    finished = Signal(int, object)          # conversation id, FinishEvent
    generationFailed = Signal(int, str)     # conversation id, message
    contextOverflow = Signal(int, str, bool, str, bool, int)  # conversation id, message, whether dropping
                                            # turns helps, the user's message taken back for the box ("":
                                            # none), whether dropping them leaves only the last message, and
                                            # the prompt's tokens (it needs session.reply_room's more)
    busyChanged = Signal(bool)
    engineDied = Signal(int, str)           # conversation id whose reply it interrupted (-1: none), message
    modelsReleased = Signal()               # a load let the loaded models go first (to change RPC servers)
    requestRefused = Signal(object, str)    # GenerateRequest that found no models (nothing stored), message
    messageStored = Signal(int)             # conversation id: the user's message is in the history
    compareProgress = Signal(str)           # which run of a compare is going
    compareRunDone = Signal(object)         # chat.compare.CompareRun: one of its runs, ended
    compared = Signal(object)               # chat.compare.CompareResult
    compareFailed = Signal(str)
    _deathNoticed = Signal(object)          # from the engine's watcher thread, handled on the worker's

    def __init__(self, history_path: str | None = None):
        super().__init__()
        self._history_path = history_path
        self._store: HistoryStore | None = None
        self.engine = EngineProcess(on_death=self._deathNoticed.emit)
        self._deathNoticed.connect(self._on_death_noticed)
        self._reported: EngineCrashed | None = None
        self.pair = None                         # the engine process's RemotePair
        self.session: ChatSession | None = None
        self._fetch_cancel = threading.Event()
        self._load_cancel = threading.Event()          # a load's cancel, which may come while no engine runs
        self._loading = False                          # a load runs on the worker's thread now
        self._rpc_in_engine: tuple[str, ...] = ()      # the RPC servers the engine process has registered

    # -- called from the UI thread (thread-safe)
    def cancel(self) -> None:
        """Stop the running generation (a reply, a compare) within one round; a load or fetch, running or
        waiting behind it, goes on (cancel_load() cancels those)."""
        session = self.session                   # (the worker thread may drop it meanwhile)
        if session is not None:
            session.controls.cancel()            # (a reply's or a compare's: it reaches the engine itself)

    def cancel_load(self) -> None:
        """Cancel the load (or fetch) asked for last (new_load()), even before the engine has heard of it:
        while the engine restarts, or while the load waits behind a reply (which goes on)."""
        self._load_cancel.set()
        self._fetch_cancel.set()
        if self._loading:                        # (else the load sees the flag once it is sent)
            self.engine.cancel()

    def new_load(self) -> None:
        """A load or fetch is about to be asked for (before its request is sent): cancels from before it are
        not its."""
        self._load_cancel.clear()
        self._fetch_cancel.clear()

    def update_spec(self, spec) -> None:
        """New speculation settings take effect from the next round of the running generation."""
        if self.session is not None:
            self.session.controls.set(spec)

    # -- slots, run on the worker thread
    def _history(self) -> HistoryStore:
        if self._store is None:
            self._store = HistoryStore(self._history_path)
        return self._store

    def _report_death(self, death: EngineCrashed, conversation_id: int = -1) -> None:
        """Tell the window once per death; the models went with the process (and the RPC servers it had
        registered with it)."""
        self.pair = self.session = None
        self._rpc_in_engine = ()
        if death is not self._reported:
            self._reported = death
            print(f"tandem: {death}", file=sys.stderr)
            self.engineDied.emit(conversation_id, str(death))

    @Slot(object)
    def _on_death_noticed(self, death: EngineCrashed) -> None:
        """A death the watcher saw; by now any request it interrupted has reported it itself."""
        self._report_death(death)

    @Slot(object)
    def load(self, request: LoadRequest) -> None:
        self.busyChanged.emit(True)
        rpc = tuple(request.target_options.rpc_servers)
        released = False
        if rpc != self._rpc_in_engine and self._rpc_in_engine:
            # llama.cpp keeps RPC devices registered for the life of the process, and would spread
            # offloaded layers over them: other servers, or none, need a fresh engine process, so the
            # models loaded now go, whether or not the new ones then load (a llama-server's session
            # is not the engine's, and stays)
            released = self.pair is not None
            if released:
                self.pair = self.session = None
            self.engine.shutdown()
            if released:
                self.modelsReleased.emit()
        self._rpc_in_engine = rpc
        self._loading = True
        try:
            pair = self.engine.load(request.target, request.draft, request.target_options, request.draft_options,
                                    progress=lambda what, f: self.loadProgress.emit(what, f),
                                    cancelled=self._load_cancel.is_set)
            session = ChatSession(pair, self._history())
        except (ModelLoadError, IncompatiblePair) as exc:
            if isinstance(exc, LoadCancelled):
                message = CANCELLED_LOAD            # (the window says what is still loaded)
            else:
                message = str(exc)
            self._load_failed(message, released)
            return
        except EngineCrashed as exc:
            self._report_death(exc)
            self.loadFailed.emit("The model engine stopped while loading")   # (every load ends in one answer)
            return
        except Exception as exc:  # anything else the engine or the OS throws at us: report, stay up
            self._load_failed(f"{os.path.basename(request.target)}: {exc}", released)
            traceback.print_exc()
            return
        finally:
            self._loading = False
            self.busyChanged.emit(False)
        self.pair, self.session = pair, session
        self.loaded.emit(LoadedPair(request.target, request.draft, session.template.note, pair.n_ctx, pair.notice,
                                    request.settings, plain_step_s=pair.plain_step_s))

    def _load_failed(self, message: str, released: bool) -> None:
        """Say that a load did not happen and, when it let the models loaded before go, that they went."""
        if released:
            message = f"{message.rstrip('.')}. {RELEASED_NOTE}"
        self.loadFailed.emit(message)

    @Slot(object)
    def connect_server(self, request: ServerRequest) -> None:
        """Chat through a running llama-server from now on (the local engine's models are let go). A
        cancel_load() meanwhile is heard between the requests that check the server, or once the one
        under way is answered or gives up (after server.CONNECT_TIMEOUT_S): the connection is not made."""
        self.busyChanged.emit(True)
        try:
            server = LlamaServer(request.url, request.api_key or None)
            info = server.connect(cancelled=self._load_cancel.is_set)
        except ServerError as exc:
            self.loadFailed.emit(CANCELLED_CONNECT if self._load_cancel.is_set() else f"Could not connect: {exc}")
            return
        finally:
            self.busyChanged.emit(False)
        if self._load_cancel.is_set():
            self.loadFailed.emit(CANCELLED_CONNECT)
            return
        if self.pair is not None:
            try:
                self.pair.close()                # the engine process lets the local models go
            except Exception:
                pass
        self.pair, self.session = None, ServerChatSession(server, self._history())
        note = {True: "",
                False: "This server does not speculate: every round is a plain step. To speculate, start it "
                       "as: " + info.command_hint(),
                None: "Whether this server speculates is not known (its /slots endpoint is off); the rounds "
                      "will show it."}[info.speculative]
        self.loaded.emit(LoadedPair(info.url, None, "", info.n_ctx or 0, note, server=info))

    @Slot()
    def fetch_demo(self) -> None:
        self.busyChanged.emit(True)
        try:
            paths = [str(models.fetch(m, progress=self.fetchProgress.emit, cancel=self._fetch_cancel.is_set))
                     for m in models.resolve(["demo"])]
        except models.FetchError as exc:
            self.fetchFailed.emit(CANCELLED_FETCH if isinstance(exc, models.FetchCancelled) else str(exc))
            return
        finally:
            self.busyChanged.emit(False)
        if self._fetch_cancel.is_set():          # (a Cancel as the last file arrived: no load follows)
            self.fetchFailed.emit(CANCELLED_FETCH)
            return
        self.fetched.emit(paths[0], paths[1])

    def _refuse(self, request: GenerateRequest) -> None:
        """No models to answer with (the engine died before the request got here): nothing was stored."""
        self.busyChanged.emit(False)
        self.requestRefused.emit(request, "The model engine is not running: reload the models, then send again."
                                 if self._reported is not None else "No model is loaded yet.")

    @Slot(object)
    def generate(self, request: GenerateRequest) -> None:
        cid = request.conversation_id
        if self.session is None:
            self._refuse(request)
            return
        self.busyChanged.emit(True)
        stored = request.kind == "reply"         # is the user's message (send, edit) in the history yet?
                                                 # (a reply's: stored before it, if it has one)
        try:
            session = self.session
            if request.kind == "send":
                session.add_user_message(cid, request.text)
            elif request.kind == "edit":                 # (checked to fit first: the history stays as it was)
                session.replace_last_user_message(cid, request.text, request.options)
            if request.kind in ("send", "edit"):
                stored = True
                self.messageStored.emit(cid)
                events = session.reply(cid, request.options)
            elif request.kind == "regenerate":
                events = session.regenerate(cid, request.options)
            elif request.kind == "continue":
                events = session.continue_reply(cid, request.options)
            else:
                events = session.reply(cid, request.options)
            self.generationStarted.emit(cid)
            for event in events:
                if isinstance(event, TokenEvent):
                    self.token.emit(event)
                elif isinstance(event, RoundEvent):
                    self.round.emit(event)
                elif isinstance(event, PromptEvent):
                    self.prompt.emit(event)
                elif isinstance(event, FinishEvent):
                    self.finished.emit(cid, event)
        except ContextOverflow as exc:
            self._overflowed(exc, cid, request.text if stored and request.kind in ("send", "reply") else "")
        except EngineCrashed as exc:
            self._report_death(exc, cid)
        except CannotContinue as exc:
            self.generationFailed.emit(cid, f"{exc}.")
        except HistoryError as exc:              # say exactly what is, and is not, saved
            if request.text and not stored:
                self.generationFailed.emit(cid, f"{exc}. Your message was not saved: it is still in the box.")
            else:
                self.generationFailed.emit(cid, f"{exc}. The reply was stopped; what is shown below is what "
                                                f"the history holds.")
        except Exception as exc:
            traceback.print_exc()
            self.generationFailed.emit(cid, f"The reply failed: {exc}. The conversation so far is saved.")
        finally:
            self.busyChanged.emit(False)

    def _overflowed(self, exc: ContextOverflow, cid: int, sent: str) -> None:
        """The conversation does not fit: a message just sent (`sent`) is taken back out of the history
        and goes back to the box, so nothing sits there unanswered."""
        taken = ""
        if sent:
            try:
                taken = sent if self.session.take_back(cid, sent) else ""
            except HistoryError:
                pass                             # (it stays stored, as before: the banner still says why)
        self.contextOverflow.emit(cid, str(exc), exc.can_drop_turns, taken, exc.only_last, exc.n_prompt)

    @Slot(int, object, str)
    def drop_oldest_turns(self, conversation_id: int, options: GenerationOptions, text: str = "") -> None:
        """Store `text` (a message the full context sent back to the box; "": none), leave out the oldest
        turns until the conversation fits, then answer its last message."""
        request = GenerateRequest("send" if text else "reply", conversation_id, text, options)
        if self.session is None:
            self._refuse(request)
            return
        self.busyChanged.emit(True)
        answer = False              # (idle in between, a message waiting for the reply's end was sent before it)
        try:
            if text:
                self.session.add_user_message(conversation_id, text)
                self.messageStored.emit(conversation_id)
            self.session.drop_oldest_turns(conversation_id, options)
            # (a regenerate that did not fit kept its reply: answering "the last message" wrote a second one)
            kind = "regenerate" if not text and can_regenerate(self.session.store.messages(conversation_id)) else "reply"
            answer = True
        except ContextOverflow as exc:
            self._overflowed(exc, conversation_id, text)
            return
        except EngineCrashed as exc:
            self._report_death(exc, conversation_id)
            return
        except HistoryError as exc:
            self.generationFailed.emit(conversation_id, str(exc))
            return
        finally:
            if not answer:
                self.busyChanged.emit(False)
        self.generate(GenerateRequest(kind, conversation_id, text, options))   # (text: taken back if it overflows)

    @Slot(int, object)
    def compare(self, conversation_id: int, options: GenerationOptions) -> None:
        """Answer the conversation's last user message with speculation off, then on (nothing stored);
        busy meanwhile, like a generation, and cancelled by `cancel()`."""
        if self.session is None:
            self.compareFailed.emit("The model engine is not running: reload the models, then compare again."
                                    if self._reported is not None else "No model is loaded yet.")
            return
        if isinstance(self.session, ServerChatSession):
            self.compareFailed.emit("Compare runs the local models with speculation off and on; a llama-server "
                                    "takes its speculation settings only when it starts.")
            return
        self.busyChanged.emit(True)
        try:
            result = run_compare(self.session, conversation_id, options, progress=self.compareProgress.emit,
                                 run_done=self.compareRunDone.emit)
        except (ContextOverflow, ValueError, HistoryError) as exc:
            self.compareFailed.emit(str(exc))
        except EngineCrashed as exc:
            self.compareFailed.emit(str(exc))
            self._report_death(exc)
        except Exception as exc:
            traceback.print_exc()
            self.compareFailed.emit(f"The compare failed: {exc}")
        else:
            self.compared.emit(result)
        finally:
            self.busyChanged.emit(False)

    @Slot()
    def shutdown(self) -> None:
        """End the engine process (it frees the models) and close the database connection (on the
        worker thread, before it stops)."""
        self.pair = self.session = None
        self.engine.shutdown()
        if self._store is not None:
            self._store.close()
            self._store = None
