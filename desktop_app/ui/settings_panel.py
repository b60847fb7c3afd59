"""Generation settings. Sampling applies to the next reply (speculation has its own bar above the chat,
ui/spec_bar.py); context size, threads, GPU layers and weight repacking reload the models."""
from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (QComboBox, QDoubleSpinBox, QFormLayout, QGroupBox, QLabel, QPlainTextEdit,
                               QPushButton, QSpinBox, QVBoxLayout, QWidget)

from desktop_app.chat.session import GenerationOptions
from desktop_app.engine import SamplingParams, SpecSettings
from desktop_app.engine.load_options import CTX_RANGE, THREADS_RANGE, LoadOptions

REPACK_CHOICES = [("Auto", "auto"), ("Off", "off"), ("On", "on")]     # (the tooltip says what Auto does)
REPACK_OPTION = {"auto": None, "off": False, "on": True}        # the setting → LoadOptions.repack
NEXT_REPLY = "A reply is being written: these apply from the next one."
LOADING_LABELS = {"n_ctx": "Context size", "n_threads": "Threads", "n_gpu_layers": "GPU layers (target)",
                  "n_gpu_layers_draft": "GPU layers (draft)", "repack": "Weight repacking"}


class _ClampingSpinBox(QSpinBox):
    """A number typed outside the range becomes its nearest end (a plain QSpinBox silently puts the
    old value back when a context size of 128 is typed, and the user cannot tell why)."""

    def fixup(self, text: str) -> str:
        try:
            value = int(text.strip().replace(self.locale().groupSeparator(), ""))
        except ValueError:
            return text
        return str(max(self.minimum(), min(self.maximum(), value)))


def _spin(lo, hi, value, step=1, decimals=None):
    w = QDoubleSpinBox() if decimals is not None else _ClampingSpinBox()
    if decimals is not None:
        w.setDecimals(decimals)
    w.setRange(lo, hi)
    w.setSingleStep(step)
    w.setValue(value)
    return w


def _form(box: QGroupBox) -> QFormLayout:
    """A form whose fields go under their labels where the panel is too narrow for both on one row."""
    form = QFormLayout(box)
    form.setRowWrapPolicy(QFormLayout.WrapLongRows)
    return form


class SettingsPanel(QWidget):
    reloadRequested = Signal(object)       # dict of loading settings
    systemPromptEdited = Signal(str)
    changed = Signal()                     # a sampling or loading field changed (to be saved)

    def __init__(self, generation: dict, loading: dict, parent=None):
        super().__init__(parent)
        layout = QVBoxLayout(self)
        sampling_box = QGroupBox("Sampling")
        form = _form(sampling_box)
        self.temperature = _spin(0.0, 2.0, 0.7, 0.05, 2)
        self.temperature.setToolTip("0 is greedy")
        self.top_k = _spin(0, 1000, 40)
        self.top_p = _spin(0.0, 1.0, 0.95, 0.05, 2)
        self.min_p = _spin(0.0, 1.0, 0.05, 0.01, 2)
        self.seed = _spin(-1, 2**31 - 1, -1)
        self.seed.setSpecialValueText("random")
        self.max_tokens = _spin(1, 32768, 1024, 64)
        for label, w in (("Temperature", self.temperature), ("Top-k", self.top_k), ("Top-p", self.top_p),
                         ("Min-p", self.min_p), ("Seed", self.seed), ("Max tokens", self.max_tokens)):
            form.addRow(label, w)
        self.next_reply = QLabel(NEXT_REPLY)      # (changed during a reply, nothing said when they applied:
        self.next_reply.setWordWrap(True)         # a new user's try)
        self.next_reply.setStyleSheet("color: #b9770e;")
        self.next_reply.hide()
        form.addRow(self.next_reply)
        self._writing = False
        layout.addWidget(sampling_box)

        system_box = QGroupBox("System prompt (this conversation)")
        v = QVBoxLayout(system_box)
        self.system_prompt = QPlainTextEdit()
        self.system_prompt.setMaximumHeight(90)
        self.system_prompt.textChanged.connect(lambda: self.systemPromptEdited.emit(self.system_prompt.toPlainText()))
        v.addWidget(self.system_prompt)
        layout.addWidget(system_box)

        load_box = QGroupBox("Loading (reloads the models)")
        form = _form(load_box)
        self.n_ctx = _spin(*CTX_RANGE, 4096, 512)
        self.n_ctx.setToolTip(f"Tokens the conversation can hold: {CTX_RANGE[0]} to {CTX_RANGE[1]:,} (a smaller "
                              f"number typed becomes {CTX_RANGE[0]}). More needs more memory.")
        self.n_threads = _spin(*THREADS_RANGE, 0)
        self.n_threads.setSpecialValueText("automatic")
        self.n_threads.setToolTip("Threads llama.cpp runs on. Automatic: one per performance core (llama.cpp's "
                                  "default), fewer while other work keeps the CPUs busy (its threads wait for "
                                  "each other at every step, so one that shares a CPU holds up the rest). A "
                                  "number: that many, always, however busy the CPUs; 0, or the arrow down "
                                  "to the bottom, is automatic again.")
        self.ngl = _spin(0, 999, 0)
        self.ngld = _spin(0, 999, 0)
        form.addRow(LOADING_LABELS["n_ctx"], self.n_ctx)
        form.addRow(LOADING_LABELS["n_threads"], self.n_threads)
        form.addRow(LOADING_LABELS["n_gpu_layers"], self.ngl)
        self.repack = QComboBox()
        self.repack.setObjectName("repack")
        self.repack.setSizeAdjustPolicy(QComboBox.AdjustToMinimumContentsLengthWithIcon)   # (a narrow
        self.repack.setMinimumContentsLength(8)                                              # panel cuts it)
        for label, key in REPACK_CHOICES:
            self.repack.addItem(label, key)
        self.repack.setToolTip("Repacking rearranges weights for faster CPU kernels. Auto probes this CPU once. Where a test "
                               "process crashes with it (Intel CPUs with AMX under some hypervisors, llama.cpp issue "
                               "#20824), it tries again with AMX kept out, and turns repacking off only if that crashes "
                               "too. Off never repacks; On always does (with AMX kept out where it crashed).")
        form.addRow(LOADING_LABELS["n_gpu_layers_draft"], self.ngld)
        form.addRow(LOADING_LABELS["repack"], self.repack)
        apply_button = QPushButton("Apply and reload")
        apply_button.clicked.connect(lambda: self.reloadRequested.emit(self.loading()))
        form.addRow(apply_button)
        self.unapplied = QLabel()                 # what differs from the models loaded, until applied
        self.unapplied.setObjectName("unappliedLoading")
        self.unapplied.setWordWrap(True)
        self.unapplied.setStyleSheet("color: #b9770e;")
        self.unapplied.hide()
        form.addRow(self.unapplied)
        self._applied: dict | None = None
        self._loading_now = False                 # models are loading, with the settings as they are now
        for signal in (self.n_ctx.valueChanged, self.n_threads.valueChanged, self.ngl.valueChanged,
                       self.ngld.valueChanged, self.repack.currentIndexChanged):
            signal.connect(self._show_unapplied)
            signal.connect(self.changed)
        for w in (self.temperature, self.top_k, self.top_p, self.min_p, self.seed, self.max_tokens):
            w.valueChanged.connect(self.changed)
            w.valueChanged.connect(self._changed_while_writing)
        layout.addWidget(load_box)
        self.template_note = QLabel()
        self.template_note.setWordWrap(True)
        layout.addWidget(self.template_note)
        layout.addStretch(1)

        self.set_generation(generation)
        self.set_loading(loading)

    def set_generation(self, g: dict) -> None:
        self.temperature.setValue(float(g.get("temperature", 0.7)))
        self.top_k.setValue(int(g.get("top_k", 40)))
        self.top_p.setValue(float(g.get("top_p", 0.95)))
        self.min_p.setValue(float(g.get("min_p", 0.05)))
        seed = g.get("seed")
        self.seed.setValue(-1 if seed is None else int(seed))
        self.max_tokens.setValue(int(g.get("max_tokens", 1024)))

    def set_loading(self, d: dict) -> None:
        self.n_ctx.setValue(int(d.get("n_ctx", 4096)))
        self.n_threads.setValue(int(d.get("n_threads", 0)))
        self.ngl.setValue(int(d.get("n_gpu_layers", 0)))
        self.ngld.setValue(int(d.get("n_gpu_layers_draft", 0)))
        self.repack.setCurrentIndex(max(0, self.repack.findData(d.get("repack", "auto"))))

    def set_applied(self, loading: dict | None) -> None:
        """The loading settings the models loaded now were loaded with (None: none are loaded)."""
        self._applied = loading
        self._show_unapplied()

    def set_models_loading(self, on: bool) -> None:
        """Whether models are loading now (with these settings): a change not yet applied is being applied."""
        self._loading_now = on
        self._show_unapplied()

    def _show_unapplied(self) -> None:
        now, then = self.loading(), self._applied
        changed = [label for key, label in LOADING_LABELS.items()
                   if then is not None and now.get(key) != then.get(key)]
        if self._loading_now:         # ("Not applied yet … until Apply and reload" stayed through the reload)
            them = "it" if len(changed) < 2 else "them"
            text = f"Applying: {', '.join(changed)}. The models are loading again with {them}."
        else:
            text = (f"Not applied yet: {', '.join(changed)}. The models loaded now use the settings they were "
                    "loaded with, until Apply and reload.")
        self.unapplied.setText(text if changed else "")
        self.unapplied.setVisible(bool(changed))

    def generation(self) -> dict:
        seed = self.seed.value()
        return {"temperature": self.temperature.value(), "top_k": self.top_k.value(), "top_p": self.top_p.value(),
                "min_p": self.min_p.value(), "seed": None if seed < 0 else seed,
                "max_tokens": self.max_tokens.value()}

    def set_writing(self, writing: bool) -> None:
        """Whether a reply is being written: sampling changed meanwhile applies from the next one, and
        the panel says so until it ends."""
        self._writing = writing
        if not writing:
            self.next_reply.hide()

    def _changed_while_writing(self) -> None:
        if self._writing:
            self.next_reply.show()

    def loading(self) -> dict:
        return {"n_ctx": self.n_ctx.value(), "n_threads": self.n_threads.value(), "n_gpu_layers": self.ngl.value(),
                "n_gpu_layers_draft": self.ngld.value(), "repack": self.repack.currentData()}

    def options(self, spec: SpecSettings) -> GenerationOptions:
        """The options of the next reply: this panel's sampling with `spec` (from the speculation bar)."""
        g = self.generation()
        sampling = SamplingParams(temperature=g["temperature"], top_k=g["top_k"], top_p=g["top_p"],
                                  min_p=g["min_p"], seed=g["seed"])
        return GenerationOptions(sampling=sampling, spec=spec, max_tokens=g["max_tokens"])


def load_options(d: dict) -> tuple[LoadOptions, LoadOptions]:
    threads = d.get("n_threads", 0)
    repack = REPACK_OPTION.get(d.get("repack", "auto"))
    return (LoadOptions(n_gpu_layers=d.get("n_gpu_layers", 0), n_threads=threads, n_ctx=d.get("n_ctx", 4096),
                        repack=repack),
            LoadOptions(n_gpu_layers=d.get("n_gpu_layers_draft", 0), n_threads=threads, n_ctx=d.get("n_ctx", 4096),
                        repack=repack))


def rpc_options(servers: str, target: LoadOptions, draft: LoadOptions) -> tuple[LoadOptions, LoadOptions]:
    """The load options with the RPC servers typed in the model bar (raises RpcError for a bad list);
    GPU layers left at 0 become 99: every layer goes to the servers, as with llama.cpp's -ngl 99."""
    from dataclasses import replace

    from desktop_app.engine.rpc import ALL_LAYERS, parse_servers

    hosts = parse_servers(servers)
    return tuple(replace(o, rpc_servers=hosts, n_gpu_layers=o.n_gpu_layers or ALL_LAYERS) for o in (target, draft))
