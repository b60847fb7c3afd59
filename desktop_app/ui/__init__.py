"""The Qt window. Everything here runs on the UI thread except `worker.EngineWorker`, which owns the
models on its own QThread and reports through signals; the UI thread never calls a model."""
