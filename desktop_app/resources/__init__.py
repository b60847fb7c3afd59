"""The window's files that are not code (icons), found with importlib.resources, so they are found
the same way from a checkout, an installed wheel and a frozen bundle. Used by the UI only."""
from __future__ import annotations

from importlib import resources
from pathlib import Path


def icon_path() -> Path:
    """The app's icon (SVG). A checkout, an installed wheel and a PyInstaller bundle all keep it
    as a plain file on disk, which is what Qt reads."""
    return Path(str(resources.files(__name__) / "icons" / "tandem.svg"))
