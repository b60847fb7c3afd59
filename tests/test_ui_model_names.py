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
    lm_too = [str(home / f".lmstudio/models/{who}/Qwen2.5-0.5B-Instruct-GGUF/Qwen2.5-0.5B-Instruct-Q4_K_M.gguf")
              for who in ("bartowski", "lmstudio-community")]                  # both found in LM Studio
    nested = [str(tmp_path / f"c/{where}/third.gguf") for where in ("a/x", "b/x", "a/y")]   # apart at no one level
    alone = str(tmp_path / "downloads/alone.gguf")
    assert found_in(hf) == "Hugging Face Qwen/Qwen2.5-0.5B-Instruct-GGUF" and found_in(alone) == "downloads"

    names = distinct_names([lm, hf, mine, ours, *twins, alone, *lm_too, *nested])
    assert names == {lm: "model.gguf (LM Studio)", hf: "model.gguf (Hugging Face Qwen/Qwen2.5-0.5B-Instruct-GGUF)",
                     mine: "model.gguf (downloads)", ours: "model.gguf (Tandem)",
                     twins[0]: "other.gguf (a)", twins[1]: "other.gguf (b)", alone: "alone.gguf",
                     lm_too[0]: "Qwen2.5-0.5B-Instruct-Q4_K_M.gguf (bartowski)",
                     lm_too[1]: "Qwen2.5-0.5B-Instruct-Q4_K_M.gguf (lmstudio-community)",
                     **{p: f"third.gguf ({Path(p).parent})" for p in nested}}

    listed = [lm, mine, alone, *lm_too]
    for path in listed:                              # (real models: a file that cannot be read is marked so)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        write_probe_model(Path(path))
    bar = ModelBar()                                 # as the lists show them: a long name is cut in the
    qtbot.addWidget(bar)                             # middle, never where it was found
    bar.set_choices(listed, [], False)
    shown = [bar.target.itemText(i) for i in range(bar.target.count())]
    assert shown[:3] == ["model.gguf (LM Studio)", "model.gguf (downloads)", "alone.gguf"]
    assert shown[3].endswith(" (bartowski)") and shown[4].endswith(" (lmstudio-community)")
    assert shown[3].startswith("Qwen2.5") and shown[4].startswith("Qwen2.5")
    assert [bar.draft.itemText(i) for i in range(1, bar.draft.count())] == shown
