"""A running llama-server as Tandem's backend: chat through its streaming /v1/chat/completions, with
the speculative rounds rebuilt from its per-token timings (rounds.py).

No Qt here. `LlamaServer.connect()` checks the server and reads what it says about itself;
`generate()` yields the engine's events (RoundEvent and its TokenEvents as each round closes, then
FinishEvent), so a consumer shows a remote reply as it shows a local one. What a remote reply cannot
show is said in LIMITS.

llama-server takes its speculation settings only at launch (`-md`, `--spec-type`, `--spec-draft-n-max`,
...): Tandem shows them and the command line that would change them, never sends them.

Failures raise ServerError with a message for the user; a reply cut short by a failure ends with a
FinishEvent whose `message` says why, after the rounds received so far (the partial reply is kept).
"""
from __future__ import annotations

import http.client
import json
import os
import re
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Callable, Iterator

from desktop_app.engine.costs import CostModel
from desktop_app.engine.events import FinishEvent, RoundEvent, StopReason, TokenEvent
from desktop_app.engine.metrics import StatsRecorder
from desktop_app.engine.sampling import SamplingParams
from desktop_app.remote.rounds import RoundRebuilder

CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 300.0          # a silent stream this long is a dead server
PER_POS = re.compile(r'^llamacpp:spec_decode_num_accepted_tokens_per_pos_total\{position="(\d+)"\}\s+([0-9.eE+-]+)', re.M)
COUNTER = re.compile(r"^llamacpp:(spec_decode_num_[a-z_]+_total)\s+([0-9.eE+-]+)", re.M)
END = {"stop": "eos", "length": "max_tokens"}    # a chunk's finish_reason, as a round's end
LIMITS = ("Rebuilt from the server's per-token timings: drafted and kept counts per round are exact; "
          "the token ids, the text of rejected drafts and the draft/verify time split are not sent.")


class ServerError(RuntimeError):
    """A failure talking to llama-server; `kind`: unreachable, auth, not_llama_server, http, cancelled, or
    context (the conversation does not fit: `n_prompt` tokens, the server's `n_ctx`)."""

    def __init__(self, kind: str, message: str, n_prompt: int = 0, n_ctx: int = 0):
        super().__init__(message)
        self.kind = kind
        self.n_prompt, self.n_ctx = n_prompt, n_ctx


@dataclass
class ServerInfo:
    url: str
    model: str                        # the model file the server loaded
    n_ctx: int | None
    build: str
    speculative: bool | None          # None: the server does not say (its /slots endpoint is off)
    spec_types: str                   # e.g. "draft-simple"
    n_max: int | None                 # draft positions its /metrics report (its --spec-draft-n-max), once known
    metrics: bool                     # /metrics on (llama-server --metrics): per-position acceptance

    def _how(self) -> str:
        return f"({self.spec_types or 'draft'}" + (f", up to {self.n_max} drafted" if self.n_max else "") + ")"

    def speculation(self) -> str:
        """What the server does, in a few words (it decides at launch)."""
        return {True: f"llama-server speculates {self._how()}", False: "llama-server does not speculate",
                None: "llama-server: speculation unknown (its /slots endpoint is off)"}[self.speculative]

    def describe(self) -> str:
        spec = {True: f"speculating {self._how()}", False: "not speculating",
                None: "speculation unknown"}[self.speculative]
        return f"llama-server at {self.url}: {os.path.basename(self.model)}, {spec}"

    def command_hint(self) -> str:
        """The llama-server command line that sets speculation (it cannot be changed per request)."""
        return "llama-server -m TARGET.gguf -md DRAFT.gguf --spec-type draft-simple --spec-draft-n-max 16 --metrics"


@dataclass
class ServerReply:
    """What generate() learnt beyond the events: per-position acceptance from /metrics, and the
    server's own final totals, for checking the rebuilt rounds against."""

    final_timings: dict = field(default_factory=dict)
    metrics_delta: dict[str, float] = field(default_factory=dict)
    accepted_per_pos: list[int] = field(default_factory=list)


def normalize_url(url: str) -> str:
    url = url.strip()
    if not re.match(r"^https?://", url):
        url = "http://" + url
    parts = urllib.parse.urlsplit(url)
    if not parts.hostname:
        raise ServerError("unreachable", f"{url!r} is not a server address (for example http://127.0.0.1:8080)")
    return url.rstrip("/")


class LlamaServer:
    def __init__(self, url: str, api_key: str | None = None, timeout_s: float = READ_TIMEOUT_S):
        self.url = normalize_url(url)
        self.api_key = api_key or None
        self.timeout_s = timeout_s
        self.info: ServerInfo | None = None
        self.last_reply = ServerReply()
        self._cancel = threading.Event()
        self._response = None

    # -- HTTP

    def _request(self, path: str, body: dict | None = None, timeout: float = CONNECT_TIMEOUT_S):
        headers = {"Accept": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.url + path, data=data, headers=headers)
        try:
            return urllib.request.urlopen(req, timeout=timeout, context=ssl.create_default_context())
        except urllib.error.HTTPError as exc:
            doc = _error_doc(exc)
            detail = str(doc.get("message", "")) if doc else ""
            if doc.get("type") == "exceed_context_size_error":
                raise ServerError("context", f"llama-server at {self.url}: {detail}",
                                  int(doc.get("n_prompt_tokens") or 0), int(doc.get("n_ctx") or 0)) from exc
            if exc.code == 401:
                raise ServerError("auth", f"llama-server at {self.url} refused the API key (401"
                                  + (f": {detail}" if detail else "") + "). "
                                  + ("Check the key: it must be one the server was started with (--api-key)."
                                     if self.api_key else "It needs one: enter the key it was started with "
                                     "(--api-key).")) from exc
            if exc.code == 404:
                raise ServerError("not_llama_server", f"{self.url}{path} does not exist (404): is {self.url} a "
                                  "llama-server? Tandem needs llama.cpp's own server.") from exc
            raise ServerError("http", f"llama-server at {self.url} answered {exc.code} {exc.reason}"
                              + (f": {detail}" if detail else "")) from exc
        except http.client.HTTPException as exc:            # something answered, but not in HTTP
            raise ServerError("not_llama_server", f"{self.url} did not answer as an HTTP server ({type(exc).__name__}"
                              f"{': ' + str(exc) if str(exc) else ''}): is it a llama-server, and is the scheme "
                              "(http or https) right?") from exc
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, ssl.SSLError):
                if isinstance(reason, ssl.SSLCertVerificationError):
                    why = (f"its certificate is not trusted here ({reason.verify_message or reason.reason}): trust "
                           "the certificate of whoever issued it (for example SSL_CERT_FILE=/path/to/ca.pem), or use "
                           "its http:// address on a network you trust")
                else:
                    why = f"the TLS handshake failed ({reason.reason or reason}): is it https, or plain http?"
                raise ServerError("unreachable", f"Cannot connect to llama-server at {self.url} securely: {why}.") from exc
            elif isinstance(reason, socket.gaierror):
                why = "that host name does not resolve"
            elif isinstance(reason, ConnectionRefusedError):
                why = "nothing is listening there"
            elif isinstance(reason, (socket.timeout, TimeoutError)):
                raise ServerError("unreachable", f"llama-server at {self.url} did not answer within {timeout:.0f} s: "
                                  "it may be busy with other requests (all its slots taken), or not a "
                                  "llama-server.") from exc
            else:
                why = str(reason)
            raise ServerError("unreachable", f"Cannot reach llama-server at {self.url}: {why}. Is it running, and "
                              "is the address right? (llama-server -m MODEL.gguf --host 127.0.0.1 --port 8080)") from exc

    def _json(self, path: str) -> dict:
        with self._request(path) as resp:
            try:
                return json.loads(resp.read().decode())
            except ValueError as exc:
                raise ServerError("not_llama_server", f"{self.url}{path} did not answer JSON: is it a "
                                  "llama-server?") from exc

    def metrics_text(self) -> str | None:
        """The /metrics page, or None when the server runs without --metrics."""
        try:
            with self._request("/metrics") as resp:
                return resp.read().decode()
        except ServerError as exc:
            if exc.kind in ("http", "not_llama_server"):
                return None
            raise

    # -- the server

    def connect(self, cancelled: Callable[[], bool] = lambda: False) -> ServerInfo:
        """Check the server and read what it says about itself (model, context, speculation).
        `cancelled` is asked between its requests: True raises ServerError("cancelled")."""
        def check() -> None:
            if cancelled():
                raise ServerError("cancelled", f"connecting to {self.url} was cancelled")

        props = self._json("/props")
        if "default_generation_settings" not in props and "model_path" not in props:
            raise ServerError("not_llama_server", f"{self.url} answered /props without llama-server's fields: "
                              "Tandem needs llama.cpp's own server.")
        check()
        speculative, types = self._slots()
        check()
        text = self.metrics_text()
        n_max = len(PER_POS.findall(text)) or None if text else None
        settings = props.get("default_generation_settings", {})
        self.info = ServerInfo(url=self.url, model=str(props.get("model_path") or props.get("model_alias") or "?"),
                               n_ctx=settings.get("n_ctx"), build=str(props.get("build_info", "")),
                               speculative=speculative, spec_types=types if speculative else "",
                               n_max=n_max, metrics=text is not None)
        return self.info

    def _slots(self) -> tuple[bool | None, str]:
        """Whether the server speculates, and how (its --spec-type list, known once a slot has run a
        task), from /slots; (None, "") when that endpoint is off."""
        try:
            slots = self._json("/slots")
        except ServerError as exc:
            if exc.kind in ("auth", "unreachable"):
                raise
            return None, ""
        if not isinstance(slots, list) or not slots:
            return None, ""
        types = set()
        for slot in slots:
            for name in str(slot.get("params", {}).get("speculative.types", "")).split(","):
                if name.strip() and name.strip() != "none":
                    types.add(name.strip())
        return any(bool(slot.get("speculative")) for slot in slots), ",".join(sorted(types))

    def cancel(self) -> None:
        """Stop the reply in flight (from any thread): the stream is closed, the partial reply kept."""
        self._cancel.set()
        resp = self._response
        if resp is not None:
            # Shutting the socket down wakes a read blocked in the worker at once; close() would wait for
            # the reader's lock, which that read holds until the server sends something.
            sock = getattr(getattr(getattr(resp, "fp", None), "raw", None), "_sock", None)
            try:
                if sock is not None:
                    sock.shutdown(socket.SHUT_RDWR)
                else:
                    resp.close()
            except OSError:
                pass

    def generate(self, messages: list[dict], params: SamplingParams, max_tokens: int,
                 stop: list[str] | None = None) -> Iterator:
        """Chat `messages` ([{"role", "content"}]) through the server: starts the request at once
        (raising ServerError if it cannot start), then returns the events, RoundEvent and its TokenEvents
        per round as each completes, then a FinishEvent (a failure mid-reply is its `message`)."""
        if self.info is None:
            self.connect()
        self._cancel.clear()
        before = self._metrics_quietly() if self.info.metrics else None
        body = {"messages": messages, "stream": True, "timings_per_token": True, "max_tokens": max_tokens,
                "temperature": params.temperature, "top_k": params.top_k, "top_p": params.top_p,
                "min_p": params.min_p, "seed": params.seed, "cache_prompt": True,
                "reasoning_format": "none"}           # a thinking model's reasoning stays in the text
        if stop:
            body["stop"] = list(stop)
        t0 = time.perf_counter()
        self.last_reply = ServerReply()
        resp = self._request("/v1/chat/completions", body, timeout=self.timeout_s)
        self._response = resp
        return self._stream(resp, before, t0, max_tokens, bool(stop))

    def _metrics_quietly(self) -> str | None:
        try:
            return self.metrics_text()
        except ServerError:
            return None

    def _stream(self, resp, before: str | None, t0: float, max_tokens: int, stop_strings: bool) -> Iterator:
        rebuilder = RoundRebuilder(max_tokens if max_tokens > 0 else None)   # (-1: the server's "no limit")
        recorder = StatsRecorder(0, 0)
        ttft = None
        text_parts: list[str] = []
        final: dict = {}
        finish_reason, message = None, ""

        def emit(rounds: list[RoundEvent]) -> Iterator:
            for r in rounds:
                recorder.add_round(r, 0)
                yield r
                pieces = list(zip(r.kinds, r.emitted_text))
                if r.end == "eos" and pieces and not pieces[-1][1] and not stop_strings:
                    pieces.pop()                      # the end-of-generation token: in the round, not the text
                    # (with stop strings asked for, "stop" may also mean one of them, whose last token
                    # is a real one: the stream does not say which, so it is counted)
                for kind, piece in pieces:
                    text_parts.append(piece)
                    yield TokenEvent(-1, piece, kind, len(text_parts) - 1)

        try:
            for event in _sse_events(resp):
                if self._cancel.is_set():
                    break
                if "error" in event:
                    err = event["error"]
                    message = f"llama-server stopped the reply: {err.get('message', err) if isinstance(err, dict) else err}"
                    break
                timings = event.get("timings")
                piece, ending = "", None
                for choice in event.get("choices", []):
                    piece += (choice.get("delta") or {}).get("content") or ""
                    ending = choice.get("finish_reason") or ending
                finish_reason = ending or finish_reason
                if piece and ttft is None:
                    ttft = time.perf_counter() - t0
                if timings:
                    final = timings
                yield from emit(rebuilder.feed(piece, timings, END.get(ending or "", "")))
            else:
                if finish_reason is None and not self._cancel.is_set():
                    message = (f"llama-server at {self.url} closed the connection mid-reply (it stopped or "
                               "restarted); the reply so far is kept.")
        except (http.client.HTTPException, OSError, ValueError, AttributeError) as exc:
            if not self._cancel.is_set():
                message = (f"The connection to llama-server at {self.url} broke mid-reply ({type(exc).__name__}: "
                           f"{exc}): it stopped or restarted; the reply so far is kept.")
        finally:
            self._response = None
            resp.close()
        cancelled = self._cancel.is_set()
        end = END.get(finish_reason or "", "")
        yield from emit(rebuilder.finish(None, "" if cancelled or message else end))
        t_total = time.perf_counter() - t0
        reason = (StopReason.CANCELLED if cancelled or message else
                  StopReason.MAX_TOKENS if finish_reason == "length" else StopReason.EOS)
        stats = recorder.finish(len(text_parts), t_total, (final.get("prompt_ms", 0.0) or 0.0) / 1000,
                                ttft or t_total, reason.value, CostModel())
        stats.n_prompt_tokens = int(final.get("prompt_n", 0) or 0) + int(final.get("cache_n", 0) or 0)
        stats.n_prompt_evaluated = int(final.get("prompt_n", 0) or 0)
        if final.get("predicted_per_second"):
            stats.tokens_per_s = float(final["predicted_per_second"])
        stats.c = stats.predicted_speedup = stats.predicted_speedup_measured = None     # not measurable remotely
        stats.t_draft_step_s = stats.t_target_step_s = stats.t_plain_pass_s = None
        stats.remote = "llama-server"
        self.last_reply.final_timings = final
        if before is not None and not cancelled and not message:
            after = self._metrics_quietly()
            if after is not None:
                delta = _counter_delta(before, after)
                # server-wide counters: another user's requests, or a restart, would make them disagree
                if delta.get("spec_decode_num_draft_tokens_total") == float(final.get("draft_n", 0)):
                    self.last_reply.metrics_delta = delta
                    self.last_reply.accepted_per_pos = _per_pos_delta(before, after)
                    if self.last_reply.accepted_per_pos:
                        self.info.n_max = len(PER_POS.findall(after))
        if not message and self.info.speculative and not self.info.spec_types:
            try:
                self.info.speculative, self.info.spec_types = self._slots()
            except ServerError:
                pass
        yield FinishEvent(text="".join(text_parts), tokens=(), stats=stats, stop_reason=reason, message=message)


def _error_doc(exc: urllib.error.HTTPError) -> dict:
    """llama-server's error object ({"message", "type", ...}), or {} when the body is not one."""
    try:
        doc = json.loads(exc.read().decode())
    except Exception:
        return {}
    err = doc.get("error", doc) if isinstance(doc, dict) else doc
    return err if isinstance(err, dict) else {"message": str(err)}


def _sse_events(resp) -> Iterator[dict]:
    """The JSON documents of a server-sent-events stream, until `data: [DONE]`."""
    for raw in resp:
        line = raw.decode("utf-8", errors="replace").strip()
        if not line.startswith("data:"):
            if line.startswith("error:"):
                yield {"error": line[len("error:"):].strip()}
            continue
        data = line[len("data:"):].strip()
        if data == "[DONE]":
            return
        yield json.loads(data)


def _per_pos(text: str) -> dict[int, float]:
    return {int(pos): float(v) for pos, v in PER_POS.findall(text)}


def _per_pos_delta(before: str, after: str) -> list[int]:
    b, a = _per_pos(before), _per_pos(after)
    return [int(round(a[i] - b.get(i, 0.0))) for i in sorted(a)]


def _counter_delta(before: str, after: str) -> dict[str, float]:
    b = {k: float(v) for k, v in COUNTER.findall(before)}
    return {k: float(v) - b.get(k, 0.0) for k, v in COUNTER.findall(after)}
