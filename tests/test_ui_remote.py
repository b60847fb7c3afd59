"""The window on the other backends (pytest-qt, offscreen): chatting through a real llama-server (the
speculation bar read-only, the panel's rounds rebuilt from the server's timings, a server that cannot
be reached said in the bar), and the RPC servers field checked before anything loads."""
from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from desktop_app.chat.history import HistoryStore
from llama_tools import KEY, free_port

TIMEOUT_MS = 120_000


def connect(qtbot, window, url, key=""):
    window.model_bar.backend.set_backend("server")
    window.model_bar.backend.url.setText(url)
    window.model_bar.backend.key.setText(key)
    before = window.model_bar.status.text()
    qtbot.mouseClick(window.model_bar.backend.connect_button, Qt.LeftButton)
    qtbot.waitUntil(lambda: not window.loading and not window.busy and window.model_bar.status.text() not in (before, ""),
                    timeout=TIMEOUT_MS)


@pytest.mark.network
@pytest.mark.slow
def test_chatting_through_a_llama_server_then_local_models(qtbot, window, spec_server, test_model_path):
    connect(qtbot, window, spec_server.url, "wrong")
    assert "refused the API key" in window.model_bar.status.text() and window.loaded is None
    connect(qtbot, window, spec_server.url, KEY)
    assert window.loaded is not None and window.loaded.server is not None, window.model_bar.status.text()
    assert "Connected" in window.model_bar.status.text()
    bar = window.spec_bar
    assert "llama-server speculates" in bar.mode_text() and "--spec-draft-n-max" in bar.mode.toolTip()
    assert not bar.switch.isVisible() and not bar.gamma.isVisible()
    assert bar.remote_hint.isVisible() and "--spec-draft-n-max" in bar.remote_hint.text()
    assert not window.model_bar.target.isVisible() and window.model_bar.backend.url.isVisible()
    window.settings_panel.temperature.setValue(0.0)
    window.settings_panel.max_tokens.setValue(40)
    window.composer.setFocus()
    window.composer.setPlainText("Write a Python function that reverses a string.")
    qtbot.keyClick(window.composer, Qt.Key_Return)
    qtbot.waitUntil(lambda: window.generating_id is None and not window.busy and window.current_id is not None,
                    timeout=TIMEOUT_MS)
    store = HistoryStore(window.store.path)
    try:
        reply = store.messages(window.current_id)[-1]
    finally:
        store.close()
    assert reply.role == "assistant" and reply.status == "done" and reply.content
    assert reply.token_ids is None                    # the server sends text, not ids
    assert reply.rounds and sum(r.get("a", 0) for r in reply.rounds) == reply.stats["n_accepted"] > 0
    assert "".join(t for r in reply.rounds for t in r["ets"]) == reply.content
    assert all(len(r["ets"]) == r["a"] + 1 for r in reply.rounds[:-1] if r["d"])   # k kept + the target's own
    # back to this machine: local models load, the bar is Tandem's again, the chat goes on locally
    window.model_bar.backend.set_backend("local")
    assert window.model_bar.target.isVisible() and window.model_bar.load_button.isVisible()
    window.load_pair(test_model_path, None)
    qtbot.waitUntil(lambda: window.loaded is not None and window.loaded.server is None and not window.busy,
                    timeout=TIMEOUT_MS)
    assert bar.switch.isVisible() and bar.switch.isEnabled() and "llama-server" not in bar.mode_text()
    assert not bar.remote_hint.isVisible()
    window.composer.setPlainText("And in one word?")
    qtbot.keyClick(window.composer, Qt.Key_Return)
    qtbot.waitUntil(lambda: window.generating_id is None and not window.busy, timeout=TIMEOUT_MS)
    store = HistoryStore(window.store.path)
    try:
        messages = store.messages(window.current_id)
    finally:
        store.close()
    assert [m.role for m in messages] == ["user", "assistant", "user", "assistant"]
    assert messages[-1].status == "done" and messages[-1].token_ids       # a local reply keeps its ids


def test_a_server_that_cannot_be_reached_is_said_in_the_bar(qtbot, window):
    port = free_port()
    connect(qtbot, window, f"http://127.0.0.1:{port}")
    text = window.model_bar.status.text()
    assert "Cannot reach llama-server" in text and str(port) in text and window.loaded is None


def test_a_cancelled_connection_is_not_made(qtbot, window):
    # a server that takes the connection and never answers: Cancel is shown, and once the request
    # gives up the bar says the connection was cancelled (not why it failed), and nothing is connected
    import socket
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(4)
    try:
        window.model_bar.backend.set_backend("server")
        window.model_bar.backend.url.setText(f"http://127.0.0.1:{silent.getsockname()[1]}")
        qtbot.mouseClick(window.model_bar.backend.connect_button, Qt.LeftButton)
        qtbot.waitUntil(lambda: window.model_bar.cancel_button.isVisible(), timeout=5000)
        qtbot.mouseClick(window.model_bar.cancel_button, Qt.LeftButton)
        assert window.model_bar.progress.format() == "Cancelling…" and not window.model_bar.cancel_button.isEnabled()
        silent.close()                                   # (its answer, a reset, ends the request at once)
        qtbot.waitUntil(lambda: not window.model_bar.cancel_button.isVisible() and not window.busy,
                        timeout=TIMEOUT_MS)
    finally:
        silent.close()
    assert window.model_bar.status.text() == "Connecting was cancelled.", window.model_bar.status.text()
    assert window.loaded is None and window.worker.session is None


def test_rpc_servers_are_checked_before_loading(qtbot, window, tmp_path):
    window.model_bar.backend.set_backend("rpc")
    assert window.model_bar.backend.rpc.isVisible() and window.model_bar.target.isVisible()
    window.model_bar.backend.rpc.setText("not an address")
    window.load_pair(str(tmp_path / "model.gguf"), None)
    assert "RPC servers" in window.model_bar.status.text() and "host:port" in window.model_bar.status.text()
    assert not window.busy


@pytest.mark.network
def test_loading_onto_rpc_servers_warns_and_says_how_to_rebuild(qtbot, window, test_model_path):
    """The installed llama-cpp-python has no RPC: the bar says how to rebuild; the warning is shown."""
    from llama_cpp import llama_cpp as L

    if L.llama_supports_rpc():
        pytest.skip("the installed llama-cpp-python has RPC")
    window.model_bar.backend.set_backend("rpc")
    window.model_bar.backend.rpc.setText(f"127.0.0.1:{free_port()}")
    window.load_pair(test_model_path, None)
    assert "unauthenticated" in window.banner.label.text()
    qtbot.waitUntil(lambda: "Could not load" in window.model_bar.status.text() and not window.busy, timeout=TIMEOUT_MS)
    assert "-DGGML_RPC=ON" in window.model_bar.status.text() and window.loaded is None


@pytest.mark.network
def test_a_failed_load_after_leaving_rpc_servers_claims_no_models(qtbot, window, test_model_path, tmp_path):
    """New RPC servers (or none, after some) need a fresh engine process, so the worker lets the loaded
    models go before loading. When that load then fails, the window must not go on saying the old
    models are loaded: it says they went, the bar says nothing runs, and they load again."""
    window.load_pair(test_model_path, None)
    qtbot.waitUntil(lambda: window.loaded is not None and not window.busy, timeout=TIMEOUT_MS)
    # as after a load onto RPC servers (which needs a llama.cpp built with RPC: tests/test_rpc.py)
    window.worker._rpc_in_engine = (f"127.0.0.1:{free_port()}",)
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a model")
    window.load_pair(str(broken), None)
    qtbot.waitUntil(lambda: "Could not load" in window.model_bar.status.text() and not window.busy,
                    timeout=TIMEOUT_MS)
    status = window.model_bar.status.text()
    assert "Still using" not in status and "let go first" in status, status
    assert window.loaded is None and window.lost_pair == (test_model_path, None)
    assert window.spec_bar.property("mode") == "idle" and window.windowTitle() == "Tandem"
    window.composer.setPlainText("Hello?")                # a message sent now offers the reload
    qtbot.keyClick(window.composer, Qt.Key_Return)
    assert "no longer loaded" in window.banner.label.text() and window.composer.toPlainText() == "Hello?"
    window.reload_lost_pair()
    qtbot.waitUntil(lambda: window.loaded is not None and not window.busy, timeout=TIMEOUT_MS)
    assert window.loaded.target == test_model_path and window.spec_bar.property("mode") != "idle"


def test_a_cancel_while_the_engine_restarts_for_other_rpc_servers_cancels_the_load(qtbot, window, test_model_path):
    """Cancel pressed while the engine process restarts (no engine runs to hear it) still cancels the load
    that follows, and the window says that the models loaded before went."""
    window.load_pair(test_model_path, None)
    qtbot.waitUntil(lambda: window.loaded is not None and not window.busy, timeout=TIMEOUT_MS)
    window.worker._rpc_in_engine = (f"127.0.0.1:{free_port()}",)   # as after a load onto RPC servers
    # Cancel, pressed between the old engine's end and the new one's start (on the worker's thread, so
    # exactly then: worker.cancel_load() is the thread-safe method the model bar's Cancel calls)
    window.worker.modelsReleased.connect(window.worker.cancel_load, Qt.DirectConnection)
    window.load_pair(test_model_path, None)
    qtbot.waitUntil(lambda: not window.loading and not window.busy, timeout=TIMEOUT_MS)
    status = window.model_bar.status.text()
    assert status.startswith("Loading was cancelled. The models loaded before were let go first"), status
    assert window.loaded is None and window.lost_pair == (test_model_path, None)
    window.worker.modelsReleased.disconnect(window.worker.cancel_load)
    window.reload_lost_pair()                              # and a load after it is not cancelled
    qtbot.waitUntil(lambda: window.loaded is not None and not window.busy, timeout=TIMEOUT_MS)


def test_a_failed_load_after_rpc_servers_with_nothing_loaded_claims_nothing_went(qtbot, window, tmp_path):
    """The engine restarts for other RPC servers whether or not models were loaded; only when some were
    does the window hear that they went."""
    released = []
    window.worker.modelsReleased.connect(lambda: released.append(True))
    window.worker._rpc_in_engine = (f"127.0.0.1:{free_port()}",)   # as after a load onto RPC servers that failed
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a model")
    window.load_pair(str(broken), None)
    qtbot.waitUntil(lambda: "Could not load" in window.model_bar.status.text() and not window.busy,
                    timeout=TIMEOUT_MS)
    assert "let go" not in window.model_bar.status.text() and not released and window.lost_pair is None
