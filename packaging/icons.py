"""Render the app's SVG icon to the PNG sizes desktops use (hicolor theme layout), with Qt's own SVG
renderer (PySide6's QtSvg, which the app already ships): no other tool needed.

    python packaging/icons.py OUT_DIR      ->  OUT_DIR/hicolor/{16..512}x{..}/apps/<id>.png + scalable/apps/<id>.svg
"""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

SIZES = (16, 22, 24, 32, 48, 64, 128, 256, 512)
APP_ID = "io.github.tandem_desktop.Tandem"


def render(svg: Path, out: Path, sizes=SIZES) -> list[Path]:
    """Write one PNG per size (and the SVG as the scalable icon) under out/hicolor; return their paths."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QGuiApplication, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    app = QGuiApplication.instance() or QGuiApplication([])      # noqa: F841 (Qt wants one for painting)
    renderer = QSvgRenderer(str(svg))
    if not renderer.isValid():
        raise SystemExit(f"icons: {svg} is not a valid SVG")
    written = []
    for size in sizes:
        image = QImage(size, size, QImage.Format.Format_ARGB32_Premultiplied)
        image.fill(Qt.GlobalColor.transparent)
        painter = QPainter(image)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        renderer.render(painter)
        painter.end()
        path = out / "hicolor" / f"{size}x{size}" / "apps" / f"{APP_ID}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        if not image.save(str(path), "PNG"):
            raise SystemExit(f"icons: could not write {path}")
        written.append(path)
    scalable = out / "hicolor" / "scalable" / "apps" / f"{APP_ID}.svg"
    scalable.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(svg, scalable)
    return written + [scalable]


if __name__ == "__main__":
    root = Path(__file__).resolve().parent.parent
    for p in render(root / "desktop_app" / "resources" / "icons" / "tandem.svg", Path(sys.argv[1])):
        print(p)
