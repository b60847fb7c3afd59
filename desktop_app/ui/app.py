"""Starting the window: `tandem`, `tandem gui [-m TARGET] [-md DRAFT] [-c N] [-t N]`, `tandem --demo`."""
from __future__ import annotations

import os
import signal
import socket
import sys

from PySide6.QtCore import QObject, QSocketNotifier, QTimer, Slot
from PySide6.QtGui import QGuiApplication, QIcon
from PySide6.QtWidgets import QApplication

from desktop_app import __version__, models
from desktop_app.resources import icon_path
from desktop_app.ui.main_window import MainWindow

DESKTOP_ID = "io.github.tandem_desktop.Tandem"
ORGANIZATION = "Tandem"
DOMAIN = "tandem-desktop.github.io"


def _model_arg(value: str | None) -> str | None:
    """A catalogue key already fetched becomes its path; anything else is taken as a path."""
    if value and value in models.MODELS and not os.path.exists(value):
        cached = models.inspect(models.MODELS[value])
        return cached.path if cached.present else value
    return value


def start(window: MainWindow, demo: bool = False, target: str | None = None, draft: str | None = None,
          server: str | None = None, api_key: str | None = None, n_ctx: int | None = None,
          n_threads: int | None = None) -> None:
    """Load what the command line asked for, else the pair used last, else show the first-run page.
    `n_ctx`, `n_threads` (-c, -t): Settings' values, set as if typed there, before anything loads."""
    panel = window.settings_panel
    for box, value in ((panel.n_ctx, n_ctx), (panel.n_threads, n_threads)):
        if value is not None:
            box.setValue(value)
    if server:
        window.model_bar.backend.set_backend("server")
        window.model_bar.backend.url.setText(server)
        window.model_bar.backend.key.setText(api_key or os.environ.get("TANDEM_API_KEY", ""))
        window.connect_server(server, api_key or os.environ.get("TANDEM_API_KEY", ""))
    elif demo:
        window.load_demo()
    elif target:
        window.load_pair(_model_arg(target), _model_arg(draft))
    elif window.settings["last_target"] and os.path.exists(window.settings["last_target"]):
        last_draft = window.settings["last_draft"]
        window.load_pair(window.settings["last_target"], last_draft if last_draft and os.path.exists(last_draft) else None)


class _ScriptedRun(QObject):
    """Send `prompt` once the models are loaded; when the reply is done, save a screenshot and quit.
    A QObject on the UI thread, so the worker's signals reach it queued."""

    def __init__(self, window: MainWindow, prompt: str, screenshot: str):
        super().__init__(window)
        self.window, self.prompt, self.screenshot = window, prompt, screenshot
        window.worker.loaded.connect(self.on_loaded)
        window.worker.finished.connect(self.on_finished)
        window.worker.loadFailed.connect(self.on_failed)

    @Slot(object)
    def on_loaded(self, _info) -> None:
        self.window.submit(self.prompt)

    @Slot(int, object)
    def on_finished(self, _cid, _event) -> None:
        QTimer.singleShot(600, self.shoot)

    @Slot(str)
    def on_failed(self, message: str) -> None:
        print(f"tandem: error: {message}", file=sys.stderr)
        self.window.close()

    def shoot(self) -> None:
        if QGuiApplication.platformName() == "xcb":       # a real X server: grab the screen as shown
            pixmap = QGuiApplication.primaryScreen().grabWindow(0)
        else:
            pixmap = self.window.grab()
        pixmap.save(self.screenshot)
        self.window.close()


def close_on_terminate(window: MainWindow):
    """SIGTERM (a logout, `kill`) and SIGINT (Ctrl+C where it was started) close the window as Quit does,
    so its settings are saved and a reply in progress is stopped and kept (they were lost, the reply
    marked as cut off by an engine failure: a user's try). Qt's event loop does not run Python
    between events, so the signal is also written to a socket Qt watches (signal.set_wakeup_fd),
    which wakes it. Returns a function that puts the earlier handlers back (run() calls it when the
    event loop ends, so a hung shutdown can still be interrupted)."""
    def terminate(*_):
        QTimer.singleShot(0, close)

    def close():                                 # (a question or file dialog open: it is answered
        modal = QApplication.activeModalWidget()   # "no" first, and its caller goes on before the
        if modal is not None:                       # window closes and the history with it)
            modal.reject()
            QTimer.singleShot(100, close)
        else:
            window.close()

    names = [name for name in ("SIGTERM", "SIGINT") if hasattr(signal, name)]
    before = {name: signal.signal(getattr(signal, name), terminate) for name in names}   # (None: set outside
                                                                                        # Python, put back as default)
    wake_read, wake_write = socket.socketpair()
    for end in (wake_read, wake_write):
        end.setblocking(False)
    wakeup_before = signal.set_wakeup_fd(wake_write.fileno())
    notifier = QSocketNotifier(wake_read.fileno(), QSocketNotifier.Read, window)
    notifier.activated.connect(lambda *_: _drain(wake_read))     # (Python runs, and with it the handler)

    restored = []

    def restore(*_):
        if not restored:
            restored.append(True)
            notifier.setEnabled(False)              # (before its socket is closed)
            signal.set_wakeup_fd(wakeup_before)
            for name, handler in before.items():
                signal.signal(getattr(signal, name), signal.SIG_DFL if handler is None else handler)
            wake_read.close()
            wake_write.close()

    return restore


def _drain(sock: socket.socket) -> None:
    try:
        while sock.recv(64):
            pass
    except OSError:                              # (nothing left to read)
        pass


def run(args) -> int:
    if getattr(args, "no_repack", False):
        os.environ["TANDEM_NO_REPACK"] = "1"    # engine/repack.py reads it; child processes inherit it
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Tandem")
    app.setApplicationVersion(__version__)
    app.setOrganizationName(ORGANIZATION)
    app.setOrganizationDomain(DOMAIN)
    app.setDesktopFileName(DESKTOP_ID)           # Wayland and X11 match the window to its .desktop entry
    app.setStyle("Fusion")                       # Qt 6's Fusion follows the system's light or dark scheme
    app.setWindowIcon(QIcon(str(icon_path())))
    window = MainWindow()
    if getattr(args, "screenshot", None):
        _ScriptedRun(window, args.prompt or "Write a Python function that reverses a string.", args.screenshot)
    window.show()
    restore = close_on_terminate(window)
    QTimer.singleShot(0, lambda: start(window, args.demo, args.target, args.draft, getattr(args, "server", None),
                                       getattr(args, "api_key", None), getattr(args, "ctx_size", None),
                                       getattr(args, "threads", None)))
    try:
        return app.exec()
    finally:
        restore()
