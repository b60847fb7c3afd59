"""Shared fixtures: the real test model, fetched once into the user cache (a second run downloads nothing)."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


@pytest.fixture(scope="session")
def test_model_path():
    from desktop_app import models

    return str(models.fetch(models.MODELS["smollm2-135m"]))


@pytest.fixture
def offline_pip_env(tmp_path):
    """Environment for a pip that can reach nothing (a closed local port): a machine without network."""
    empty = tmp_path / "no-wheels"
    empty.mkdir(exist_ok=True)
    return {"PIP_INDEX_URL": "http://127.0.0.1:9/simple/", "PIP_EXTRA_INDEX_URL": "http://127.0.0.1:9/simple/",
            "PIP_FIND_LINKS": str(empty), "PIP_RETRIES": "0", "PIP_DEFAULT_TIMEOUT": "2",
            "PIP_NO_CACHE_DIR": "1"}
