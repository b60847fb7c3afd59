"""The main window's model loading: the models found and offered, loading a pair (on this machine or onto
RPC servers), connecting to a llama-server, fetching the demo pair, and what the bar says after; a
message sent meanwhile waits for the models (as one sent while a reply or compare runs waits for it).
A mixin of MainWindow (main_window.py); the work itself is the worker's."""
from __future__ import annotations

import os
import time

from desktop_app import models
from desktop_app.counts import count
from desktop_app.engine.process.client import STAGES
from desktop_app.engine.rpc import WARNING as RPC_WARNING
from desktop_app.engine.rpc import RpcError
from desktop_app.models.discovery import find_gguf_files
from desktop_app.models.pairing import suggest_pair
from desktop_app.ui.settings_panel import load_options, rpc_options
from desktop_app.ui.worker import CANCELLED, RELEASED_NOTE, GenerateRequest, LoadedPair, LoadRequest, ServerRequest

STOP_GRACE_S = 0.5       # a Stop this soon after a waiting message's reply began by itself was meant for the one before
QUEUED_NOTE = "The models are loading; your message will be sent once they are ready."
NOT_SENT_NOTE = "The models did not load, so your message was not sent; it is still in the box."


class ModelsMixin:
    @property
    def loaded(self) -> LoadedPair | None:
        """The pair loaded, or a llama-server connected to (None: neither)."""
        return self._loaded

    @loaded.setter
    def loaded(self, pair: LoadedPair | None) -> None:
        self._loaded = pair
        local = pair is not None and pair.server is None
        self.model_bar.set_loaded((pair.target, pair.draft) if local else None)
        self.settings_panel.set_applied(pair.settings if local else None)

    def refresh_models(self) -> None:
        demo = [models.inspect(m) for m in models.resolve(["demo"])]
        files = [str(p) for p in find_gguf_files(self.settings["model_folders"])]
        chosen = self.model_bar.target_path()
        self.model_bar.set_choices(files, self.settings["recent_pairs"], all(d.verified for d in demo),
                                   tuple(d.path for d in demo), self.settings["model_folders"])
        if chosen is None:      # (the last pair at the start; later the bar keeps the user's choice: adding a
            self.model_bar.select(self.settings["last_target"], self.settings["last_draft"])   # models folder
            # put the last loaded pair back in the boxes, and a draft chosen there was gone: a new user's try)
        if not self.loaded:
            self._offer_models(files, demo)
        if self.loaded:                   # (without, a conversation the user opened stays open)
            self.stack.setCurrentWidget(self.chat)

    def _offer_models(self, files: list[str], demo: list) -> None:
        """The first-run page offers to load what is here: the demo pair when cached and verified, else
        the best pair among the files found (the larger model as the target), preselected in the bar."""
        cached = _cached(demo)
        last = self.settings["last_target"]
        last = last if last and os.path.exists(last) and self.model_bar.target_path() == last else None
        if last and self.model_bar.loadable()[0]:
            self._offer(cached)
            return
        if cached:                                          # (a last model that cannot be read stays in the
            choice, is_demo = cached, True                  # bar, its line saying why, and the page offers
        else:                                               # what can load: a review)
            choice, is_demo = suggest_pair(files), False
        if choice and self.first_run.offered is None and not last:   # (later, the bar keeps the user's choice)
            self.model_bar.select(*choice)
        self.first_run.offer(*(choice or (None, None)), demo=is_demo)

    def _offer(self, demo: tuple | None) -> None:
        """The welcome page offers what of the bar's choice can load (ModelBar.loadable), and says why
        where that is the target alone or nothing. `demo`: the demo pair's paths, when cached."""
        t, d, note = self.model_bar.loadable()
        if t is None and demo is not None:      # (a file that failed to load offered to fetch the demo pair
            self.first_run.offer(*demo, demo=True, note=note)   # already here: a new user's try)
            return
        self.first_run.offer(t, d, demo=demo is not None and (t, d) == tuple(demo), note=note,
                             demo_here=demo is not None)

    def _offer_bar_choice(self) -> None:
        """The user chose another file in the bar while nothing is loaded: the welcome page offers it
        (it went on naming the file chosen before: a new user's try)."""
        if not self.loaded and not self.loading:
            self._offer(_cached([models.inspect(m) for m in models.resolve(["demo"])]))

    def add_model_folder(self, folder: str) -> None:
        if folder not in self.settings["model_folders"]:
            self.settings["model_folders"].append(folder)
            self._say(self._save_settings())
        self.refresh_models()

    def remove_model_folder(self, folder: str) -> None:
        """Take an added models folder off the lists (its files stay where they are). A file chosen or
        loaded from it stays in its box (the boxes list the files chosen too)."""
        if folder in self.settings["model_folders"]:
            self.settings["model_folders"].remove(folder)
            self._say(self._save_settings())
        self.refresh_models()

    def load_pair(self, target: str, draft: str | None) -> bool:
        """Ask for `target` (+ `draft`) to be loaded; False: refused at once (the bar says why)."""
        settings = self.settings_panel.loading()
        t_opts, d_opts = load_options(settings)
        if self.model_bar.backend.backend() == "rpc":
            try:
                t_opts, d_opts = rpc_options(self.model_bar.rpc_servers(), t_opts, d_opts)
            except RpcError as exc:
                self.model_bar.show_error(f"RPC servers: {exc}")
                return False
            self._say(f"Loading onto the RPC servers {', '.join(t_opts.rpc_servers)}. {RPC_WARNING}")
        self.model_bar.select(target, draft)
        if not self.loaded:                # the welcome page names the pair loading, not another (it offered
            demo = [models.inspect(m) for m in models.resolve(["demo"])]   # the last pair, and to fetch
            self.first_run.offer(target, draft, demo=(target, draft) == tuple(d.path for d in demo),  # the demo
                                 demo_here=_cached(demo) is not None)                 # that was loading)
        waits = self.busy                  # (a reply or compare runs: the load starts when it ends; "Loading 0 %"
        self._begin_load()                 # said nothing of why it did not move, a new user's try)
        self.model_bar.show_progress("Loading once the reply or compare ends" if waits else "Loading",
                                     None if waits else 0.0, waiting=waits)   # (its Cancel counts from now)
        self.worker.new_load()
        self.requestLoad.emit(LoadRequest(target, draft, t_opts, d_opts, settings))
        return True

    def connect_server(self, url: str, api_key: str) -> None:
        self._begin_load()
        self.model_bar.show_progress(f"Connecting to {url}", 0.0)         # (its Cancel counts from now)
        self.worker.new_load()
        self.requestServer.emit(ServerRequest(url, api_key))

    def _on_load_progress(self, what: str, fraction: float) -> None:
        """Reading the model files is measured; probing the CPU and timing the passes are not (the bar
        sat at 100 % for most of a minute while they ran on a slow machine: a user's try)."""
        label = STAGES.get(what, f"loading {what}")
        self.model_bar.show_progress(label[:1].upper() + label[1:], fraction if what in ("target", "draft") else None)

    def load_demo(self) -> None:
        demo = models.resolve(["demo"])
        if all(models.inspect(m).verified for m in demo):
            self.load_pair(*(str(models.model_path(m)) for m in demo))
            return
        self._begin_load()
        self.worker.new_load()
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
        started = self.load_pair(target, draft)
        self._end_load(ok=started)                       # (the fetch's: the load, if it started, counts on)

    def _on_fetch_failed(self, message: str) -> None:
        self.first_run.progress.hide()
        self._end_load(ok=False)
        self.model_bar.show_error(message if message.startswith(CANCELLED) else
                                  f"Fetching the demo pair failed: {message}")

    def _on_loaded(self, info: LoadedPair) -> None:
        if self._closing:          # already-queued worker signals after close
            return
        self.loaded = info
        self.lost_pair = None
        if info.server is not None:                      # a llama-server: its own models and speculation
            unsaved = ""
            names = f"{os.path.basename(info.server.model)} (llama-server)"
            self.model_bar.show_loaded(f"Connected: {info.server.describe()}.")
            self.spec_bar.set_remote(info.server.speculation(), info.server.command_hint())
        else:
            self.settings.remember_pair(info.target, info.draft)
            unsaved = self._save_settings()
            names = os.path.basename(info.target) + (f" + {os.path.basename(info.draft)}" if info.draft else "")
            # (a thread count set in Settings slowed every reply and was shown nowhere: a new user's try)
            threads = int((info.settings or {}).get("n_threads") or 0)
            on = f", {count(threads, 'thread')} as set in Settings" if threads else ""
            asked = int((info.settings or {}).get("n_ctx") or 0)     # (`-c 300` read "context 512 tokens" here
            if asked and asked != info.n_ctx:                         # and 300 in Settings, a new user's try)
                on = f": {asked} set, {'rounded up' if info.n_ctx > asked else 'cut'} by llama.cpp{on}"
            self.model_bar.show_loaded(f"Loaded {names} (context {info.n_ctx} tokens{on})."
                                       + (f" Note: {info.template_note}." if info.template_note else ""))
            self.spec_bar.set_remote(None)
        self.settings_panel.template_note.setText(info.template_note)
        self.spec_panel.set_plain_rate(1.0 / info.plain_step_s if info.plain_step_s > 0 else None)
        self.spec_bar.set_draft_available(bool(info.draft))
        self._end_load(ok=True)                          # (a message that waited is sent: before the notices)
        self._overflow_after_load(info.n_ctx)
        self._say(" ".join(n for n in (info.notice, unsaved) if n))
        self.setWindowTitle(f"Tandem — {names}")
        self.refresh_models()
        self.open_latest()
        self.stack.setCurrentWidget(self.chat)
        self._update_buttons()

    def _on_models_released(self) -> None:
        """The worker let the loaded models go before loading others (new RPC servers need a new engine
        process): nothing is loaded until that load succeeds, and if it fails the old pair is the one
        to load again."""
        if self._closing:          # already-queued worker signals after close
            return
        if self.loaded is not None and self.loaded.server is None:
            self.lost_pair = (self.loaded.target, self.loaded.draft)
        self.loaded = None
        self.spec_bar.set_draft_available(None)            # the bar says nothing runs until a load
        self.setWindowTitle("Tandem")
        self._update_buttons()

    def _on_load_failed(self, message: str) -> None:
        if self._closing:          # already-queued worker signals after close
            return
        remote = self.loaded is not None and self.loaded.server is not None
        still = ("" if not self.loaded else f" Still connected to {self.loaded.target}." if remote else
                 f" Still using {os.path.basename(self.loaded.target)}"
                 + (f" + {os.path.basename(self.loaded.draft)}" if self.loaded.draft else "") + ".")
        said = message if message.startswith(("Could not", *CANCELLED)) else f"Could not load: {message}"
        reason, note, _ = message.partition(RELEASED_NOTE)      # (the worker's note on the models let go)
        if self.loaded and not remote:                   # (first: the error is about the bar as it is then)
            self.model_bar.select(self.loaded.target, self.loaded.draft)
        elif not self.loaded and (pointer := self.model_bar.says_why(reason)):   # (the bar still shows the
            said = f"{pointer} {note}".strip()           # files, and their lines say why: once is enough)
        self.model_bar.show_error(said.rstrip(".") + "." + still)
        self._end_load(ok=False)
        self._offer_bar_choice()                         # (with nothing loaded: what of it can load)

    # -- while models are fetched, loaded or connected to

    @property
    def loading(self) -> bool:
        return self._loads > 0

    def _say_not_loaded(self, text: str) -> None:
        """A message sent with no model loaded: the banner says how to load one, and loads the pair the
        bar shows and then sends it with one click (the message stays in the box meanwhile); after the
        models were lost (the engine stopped, or a failed load let them go), with the bar on them or
        on a file that cannot be read, it offers to reload them. Another file chosen in the bar while
        it shows: it speaks of that one (_choice_changed)."""
        bar = self.model_bar
        target, draft, unreadable = bar.target_path(), bar.draft_path(), bar.unreadable()
        alone, _, why = bar.loadable()
        if self.lost_pair and (self.lost_pair == (target, draft) or unreadable):
            self.banner.show_message("The models are no longer loaded; reload them to send your message "
                                     "(it stays in the box).", [("Reload the models", self.reload_lost_pair)])
        elif target and alone is None:     # (the target cannot be read)
            self.banner.show_message(f"No model is loaded, and {target}, chosen in the bar above, cannot be "
                                     "loaded (its line there says why): choose another file.")
        elif alone and why:                # (the draft cannot go with it: "Load and send" could only fail)
            name = os.path.basename(alone)
            self.banner.show_message(f"No model is loaded; {name} is chosen in the bar above, but {why}.",
                                     [(f"Load {name} alone and send", lambda: self._load_and_send(text, alone=True))])
        elif target:
            self.banner.show_message(f"No model is loaded; {os.path.basename(target)} is chosen in the bar "
                                     "above.", [("Load and send", lambda: self._load_and_send(text))])
        else:
            self.banner.show_message("No model is loaded: choose a GGUF file and press Load, or fetch the demo pair.")
        self.not_loaded_note = (text, self.banner.label.text())

    def _choice_changed(self) -> None:
        """Another file chosen in the bar: a banner about the last one's loading speaks of this one."""
        said = self.not_loaded_note
        if said and not self.banner.isHidden() and self.banner.label.text() == said[1] and not self.loaded:
            self._say_not_loaded(said[0])

    def _load_and_send(self, text: str, alone: bool = False) -> None:
        """`text`, or what the box holds now if it was edited meanwhile; `alone`: the target alone."""
        if self.load_pair(self.model_bar.target_path(), None if alone else self.model_bar.draft_path()):
            self.queue_message(self.composer.toPlainText().strip() or text)

    def wait_for_the_run(self, text: str) -> None:
        """Enter while a reply or compare runs: the message waits, and goes when it ends. (Enter did
        nothing here, and said nothing: a new user's try; then the banner saying so stayed after the
        reply: another.) Enter twice: it is on its way. One message waits at a time."""
        if text == self.pending_text and self.generating_id == self.current_id:
            return
        if self.queued and self.queued[0] != self.current_id and self.banner.kind == "queued":
            self.banner.show_message(f"A message is waiting already, in “{self._title(self.queued[0])}”, to be sent "
                                     "when the run ends; send this one after it (it stays in the box).",
                                     [("Don't send that one", self._drop_queued)], dismiss=False, kind="queued")
            return
        yours = "your message"
        if self.generating_id is None:
            wait = "A compare is running"
        elif self.generating_id == self.current_id:
            wait = "A reply is being written"
        else:                          # (the note follows to other conversations: "your message" read as one
            wait = f"A reply is being written in “{self._title(self.generating_id)}”"   # written there, a user's try)
            yours = f"your message in “{self._title(self.current_id)}”"
        self.queue_message(text, f"{wait}; {yours} will be sent when it ends.", follows=True)

    def queue_message(self, text: str, note: str = QUEUED_NOTE, follows: bool = False) -> None:
        """A message sent while the models get ready, or while a reply or a compare runs: it waits for
        them (it stays in the box meanwhile), and `note` says so. `follows`: the note stays while other
        conversations are open, and the message is sent in its own when the wait ends (a user looked at
        another conversation meanwhile, and the promise was taken back); else opening another takes it."""
        self.queued = (self.current_id, self.editing, text)
        self.banner.show_message(note, [("Don't send it", self._drop_queued)],
                                 about=None if follows else self.current_id, dismiss=False, kind="queued")

    def _drop_queued(self) -> None:
        self.queued = None
        if self.banner.kind == "queued":
            self.banner.hide()

    def send_queued(self) -> None:
        """The models are ready, or the reply or compare has ended: send the message that waited, if it
        is still the box's text in the conversation it was written in and the banner still says it waits;
        else say that it was not sent, unless the banner says something else now (a message too long for
        the context, a failure: its choices stay, and the text is in the box)."""
        queued, self.queued = self.queued, None
        if queued is None:
            return
        waiting = self.banner.kind == "queued" and not self.banner.isHidden()
        conversation, editing, text = queued
        kept = self.drafts.get(conversation)          # (its conversation's box, while another is open)
        if waiting and queued == (self.current_id, self.editing, self.composer.toPlainText().strip()):
            self.banner.hide()
            self.submit(text)
            self.queued_reply_at = self.reply.started_at
        elif waiting and kept is not None and (kept.text.strip(), kept.edit_of is not None) == (text, editing):
            self.banner.hide()
            self.pending_text, self.pending_edit = text, editing    # (its box empties once it is stored)
            self._start(GenerateRequest("edit" if editing else "send", conversation, text, self._options()))
            self.queued_reply_at = self.reply.started_at
        elif waiting or self.banner.isHidden():
            self.banner.show_message("The message that waited was not sent: the box or the conversation changed "
                                     "since (what you typed is kept in its conversation's box). Send it again "
                                     "when you are ready.", about=conversation)   # (not over the next one's)

    def cancel_run(self, comparing: bool) -> None:
        """Stop the reply or compare running (`comparing`). A reply written in another conversation than
        the one open (Esc there stops it) is said to be stopped, with a way to open it: it was stopped
        out of sight, and nothing said so (a new user's try)."""
        self.worker.cancel()
        there = self.generating_id
        if not comparing and there is not None and there != self.current_id:
            self.banner.show_message(f"Stopped the reply in '{self._title(there)}'.",
                                     [("Open it", lambda: self.open_conversation(there, show=True))],
                                     about=-1 if self.current_id is None else self.current_id)   # (not app-wide)

    def stop_came_late(self) -> bool:
        """A Stop (the button, Esc) that reached the window within STOP_GRACE_S of a waiting message's reply
        beginning by itself as the reply before it ended: meant for that one, which has ended. Said, and
        the new reply goes on: it stopped the new one, which a new user's try had not meant to. (Not a
        reply sent by itself after a load or a compare, nor one sent by hand.)"""
        reply = self.reply
        if (self.queued_reply_at != reply.started_at or not reply.ended_at
                or reply.started_at - reply.ended_at >= STOP_GRACE_S
                or time.monotonic() - reply.started_at >= STOP_GRACE_S):
            return False
        self.queued_reply_at = None
        self.banner.show_message("The reply had ended as you pressed Stop, and the message that waited was sent: "
                                 "its reply goes on. Press Stop or Esc again to stop it.", about=self.generating_id)
        return True

    def _begin_load(self) -> None:
        """A fetch, load or connection starts: the welcome page offers nothing meanwhile, and a message
        sent meanwhile waits for the models (MainWindow.submit)."""
        self._loads += 1
        self.first_run.set_loading(True)
        self.settings_panel.set_models_loading(True)

    def _end_load(self, ok: bool) -> None:
        """One ended (`ok`: with models ready). Once none is left, a message that waited is sent if the
        last one left models ready; else it is not sent (not even to models still loaded from before),
        and the banner says so."""
        self._loads = max(0, self._loads - 1)
        if self._loads:
            return
        self.first_run.set_loading(False)
        self.settings_panel.set_models_loading(False)
        if ok and self.loaded is not None:
            self._forget_not_loaded()
            self.send_queued()
        elif self.queued is not None:
            self.queued = None
            self.banner.show_message(NOT_SENT_NOTE)

    def _forget_not_loaded(self) -> None:
        """Models are ready: a banner saying none were (or that a message waited in vain for them) is
        out of date. It stayed through the load, the reply and a reload (a user's try)."""
        said = (NOT_SENT_NOTE, self.not_loaded_note[1]) if self.not_loaded_note else (NOT_SENT_NOTE,)
        if not self.banner.isHidden() and self.banner.label.text() in said:
            self.banner.hide()
        self.not_loaded_note = None

    def _reload_with(self, loading: dict) -> None:
        self.settings.data["loading"] = loading
        self._say(self._save_settings())
        if self.loaded is not None and self.loaded.server is not None:
            self._say("Saved. These loading settings apply to models on this machine; the llama-server "
                      "loads its own.")
            return
        in_use = (self.loaded.target, self.loaded.draft) if self.loaded else self.lost_pair
        if not (in_use and in_use[0]):              # (nothing loaded: saved, for the next load)
            return
        # the pair the bar shows (the user chose it there, then changed settings: reloading the pair in use
        # instead put it back in the boxes unsaid, a new user's try); where it cannot load, the bar says why
        target, draft, why = self.model_bar.loadable() if self.model_bar.backend.backend() != "server" else (None,) * 3
        if why:
            self.model_bar.show_error(f"Not reloaded: {why}.")
            return
        self.load_pair(*((target, draft) if target else in_use))


def _cached(demo: list) -> tuple | None:
    """The demo pair's paths where it is cached and verified (`demo`: models.inspect of each model)."""
    return tuple(d.path for d in demo) if demo and all(d.verified for d in demo) else None
