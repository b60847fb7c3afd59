"""Where the models run, chosen in the model bar: this machine, a llama-server, or llama.cpp RPC servers."""
from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QLineEdit, QPushButton, QWidget

from desktop_app.engine.rpc import WARNING as RPC_WARNING

BACKENDS = (("local", "This machine"), ("server", "llama-server"), ("rpc", "RPC servers (experimental)"))


class BackendRow(QWidget):
    changed = Signal(str)                    # "local", "server" or "rpc"
    connectRequested = Signal(str, str)      # server URL, API key ("" for none)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.combo = QComboBox()
        self.combo.setObjectName("backendCombo")
        for key, label in BACKENDS:
            self.combo.addItem(label, key)
        self.combo.setToolTip("Where the models run: here; in a running llama-server (its own models and "
                              "speculation settings); or with their layers on llama.cpp ggml-rpc-server machines")
        self.url = QLineEdit()
        self.url.setObjectName("serverUrl")
        self.url.setPlaceholderText("http://127.0.0.1:8080")
        self.key = QLineEdit()
        self.key.setObjectName("serverKey")
        self.key.setPlaceholderText("API key (if any)")
        self.key.setEchoMode(QLineEdit.Password)
        self.connect_button = QPushButton("Connect")
        self.connect_button.setObjectName("connectButton")
        self.connect_button.clicked.connect(self._connect)
        self.url.returnPressed.connect(self._connect)
        self.rpc = QLineEdit()
        self.rpc.setObjectName("rpcServers")
        self.rpc.setPlaceholderText("host:port, host:port")
        self.rpc.setToolTip(RPC_WARNING + " Tandem only connects to the hosts typed here, never listens. The "
                            "target's and draft's layers go to them (GPU layers 99 unless set in Settings).")
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(QLabel("Models on"))
        row.addWidget(self.combo)
        self.server_widgets = [self.url, self.key, self.connect_button]
        for w in self.server_widgets:
            row.addWidget(w, 2 if w is self.url else 1 if w is self.key else 0)
        row.addWidget(self.rpc, 2)
        row.addStretch(0)
        self.combo.currentIndexChanged.connect(self._switched)
        self._switched()

    def backend(self) -> str:
        return self.combo.currentData()

    def set_backend(self, key: str) -> None:
        self.combo.setCurrentIndex(max(0, self.combo.findData(key)))

    def rpc_servers(self) -> str:
        return self.rpc.text().strip() if self.backend() == "rpc" else ""

    def _switched(self, *_) -> None:
        key = self.backend()
        for w in self.server_widgets:
            w.setVisible(key == "server")
        self.rpc.setVisible(key == "rpc")
        self.changed.emit(key)

    def _connect(self) -> None:
        if self.url.text().strip():
            self.connectRequested.emit(self.url.text().strip(), self.key.text())
