"""Files of one name found in two places are told apart in the model bar's lists (models/discovery.py's
distinct_names): they looked alike, their paths only in the tooltips (a new user's try)."""
from __future__ import annotations

from pathlib import Path

from desktop_app.engine.probe_model import write_probe_model
from desktop_app.models import store
from desktop_app.models.discovery import distinct_names, found_in
from desktop_app.ui.model_bar import ModelBar


def test_files_of_one_name_say_where_each_was_found(qtbot, tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv(store.MODELS_DIR_ENV, str(tmp_path / "tandem"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_HOME", raising=False)
    monkeypatch.delenv("LLAMA_CACHE", raising=False)
    lm = str(home / ".lmstudio/models/lmstudio-community/Qwen2.5-0.5B-Instruct-GGUF/model.gguf")
    hf = str(home / ".cache/huggingface/hub/models--Qwen--Qwen2.5-0.5B-Instruct-GGUF/snapshots/0a1b/model.gguf")
    mine = str(tmp_path / "downloads/model.gguf")
    ours = str(tmp_path / "tandem/model.gguf")
    twins = [str(tmp_path / f"{side}/x/other.gguf") for side in ("a", "b")]     # alike in their folders' names too
    alone = str(tmp_path / "downloads/alone.gguf")
    assert found_in(hf) == "Hugging Face Qwen/Qwen2.5-0.5B-Instruct-GGUF" and found_in(alone) == "downloads"

    names = distinct_names([lm, hf, mine, ours, *twins, alone])
    assert names == {lm: "model.gguf (LM Studio)", hf: "model.gguf (Hugging Face Qwen/Qwen2.5-0.5B-Instruct-GGUF)",
                     mine: "model.gguf (downloads)", ours: "model.gguf (Tandem)",
                     twins[0]: f"other.gguf ({tmp_path / 'a/x'})", twins[1]: f"other.gguf ({tmp_path / 'b/x'})",
                     alone: "alone.gguf"}

    for path in (lm, mine, alone):                   # (real models: a file that cannot be read is marked so)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        write_probe_model(Path(path))
    bar = ModelBar()                                 # as the lists show them (cut in the middle where long)
    qtbot.addWidget(bar)
    bar.set_choices([lm, mine, alone], [], False)
    shown = [bar.target.itemText(i) for i in range(bar.target.count())]
    assert shown == ["model.gguf (LM Studio)", "model.gguf (downloads)", "alone.gguf"]
    assert [bar.draft.itemText(i) for i in range(1, bar.draft.count())] == shown
