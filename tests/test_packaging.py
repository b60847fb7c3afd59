"""Packaging: the desktop entry and AppStream metadata pass their validators; the icons are rendered
at every size; and the PyInstaller bundle, built by packaging/build.py, prints its version,
generates with the test model exactly as the source tree does, opens its window under Xvfb
(screenshot kept in artifacts/), and its install.sh installs and removes the desktop files.

The validators are Debian's desktop-file-utils and appstream, and the window needs Xvfb (.ci/run
installs them all); where they are missing those checks are skipped, saying so."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PySide6.QtGui import QImage

from desktop_app import __version__

ROOT = Path(__file__).resolve().parent.parent
PACKAGING = ROOT / "packaging"
APP_ID = "io.github.tandem_desktop.Tandem"
DESKTOP = PACKAGING / f"{APP_ID}.desktop"
METAINFO = PACKAGING / f"{APP_ID}.metainfo.xml"
ARTIFACTS = ROOT / "artifacts"
PROMPT = "Write a Python function that reverses a string."


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed (Debian: desktop-file-utils, appstream; .ci/run installs them)")
    return path


def _desktop_problems(path: Path) -> str:
    out = subprocess.run([_tool("desktop-file-validate"), str(path)], capture_output=True, text=True)
    problems = [line for line in (out.stdout + out.stderr).splitlines() if "error:" in line or "warning:" in line]
    return "\n".join(problems) if out.returncode or problems else ""


def test_the_desktop_entry_passes_desktop_file_validate():
    assert _desktop_problems(DESKTOP) == ""


def test_the_metainfo_passes_appstreamcli_validate():
    out = subprocess.run([_tool("appstreamcli"), "validate", "--no-net", str(METAINFO)], capture_output=True, text=True)
    problems = [line for line in out.stdout.splitlines() if line.startswith(("E:", "W:"))]
    assert out.returncode == 0 and not problems, out.stdout + out.stderr


def test_the_validators_catch_a_broken_file(tmp_path):
    """The two checks above can fail: the same files, broken, are refused."""
    broken = tmp_path / f"{APP_ID}.desktop"
    broken.write_text(DESKTOP.read_text().replace("Type=Application\n", ""))
    assert _desktop_problems(broken)
    bad_xml = tmp_path / f"{APP_ID}.metainfo.xml"
    bad_xml.write_text(METAINFO.read_text().replace("<summary>", "<summary>A ").replace("<name>Tandem</name>", ""))
    out = subprocess.run([_tool("appstreamcli"), "validate", "--no-net", str(bad_xml)], capture_output=True, text=True)
    assert out.returncode != 0


def test_the_desktop_files_agree_with_the_app():
    """The entry names the icon and window class the app sets, and the metainfo launches that entry."""
    from desktop_app.ui.app import DESKTOP_ID

    entry = dict(line.split("=", 1) for line in DESKTOP.read_text().splitlines() if "=" in line)
    assert DESKTOP_ID == APP_ID and entry["Icon"] == APP_ID and entry["Exec"].split()[0] == "tandem"
    assert f'<launchable type="desktop-id">{APP_ID}.desktop</launchable>' in METAINFO.read_text()
    assert f'<release version="{__version__}"' in METAINFO.read_text()


def test_icons_are_rendered_from_the_svg_at_every_size(tmp_path):
    sys.path.insert(0, str(PACKAGING))
    try:
        import icons
    finally:
        sys.path.remove(str(PACKAGING))
    written = icons.render(ROOT / "desktop_app" / "resources" / "icons" / "tandem.svg", tmp_path)
    for size in (16, 22, 24, 32, 48, 64, 128, 256, 512):
        image = QImage(str(tmp_path / "hicolor" / f"{size}x{size}" / "apps" / f"{APP_ID}.png"))
        assert (image.width(), image.height()) == (size, size)
        assert image.pixelColor(size // 2, size // 2).alpha() == 255       # drawn, not blank
        assert image.pixelColor(0, 0).alpha() < 255                        # the rounded corner stays clear
    assert (tmp_path / "hicolor" / "scalable" / "apps" / f"{APP_ID}.svg").exists() and len(written) == 10


def test_the_icon_is_found_through_importlib_resources():
    from desktop_app.resources import icon_path

    assert icon_path().is_file() and icon_path().read_text().startswith("<svg")


# --- the bundle --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    pytest.importorskip("PyInstaller", reason="pip install -e '.[bundle]'")
    out = tmp_path_factory.mktemp("bundle")
    build = subprocess.run([sys.executable, str(PACKAGING / "build.py"), "--dist", str(out / "dist"),
                            "--work", str(out / "work")], capture_output=True, text=True, timeout=1800)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    folder = out / "dist" / "Tandem"
    tars = list((out / "dist").glob(f"Tandem-{__version__}-linux-*.tar.gz"))
    assert len(tars) == 1 and tars[0].stat().st_size > 10_000_000
    return folder


def _env(tmp_path: Path, **extra) -> dict:
    return {**os.environ, "TANDEM_DATA_DIR": str(tmp_path / "data"), "TANDEM_CONFIG_DIR": str(tmp_path / "config"),
            **extra}


@pytest.mark.slow
def test_the_bundle_prints_its_version_and_build(bundle):
    out = subprocess.run([str(bundle / "tandem"), "--version"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"tandem {__version__} (bundle of ") and "GGML_NATIVE=ON" in out.stdout
    assert "needs a CPU with" in out.stdout and "AVX" in out.stdout and out.stdout.count("\n") == 1
    info = (bundle / "BUILD-INFO.txt").read_text()
    assert f"Tandem {__version__}" in info and "--portable" in info and "./install.sh --uninstall" in info


@pytest.mark.slow
@pytest.mark.network
def test_the_bundle_generates_as_the_source_tree_does(bundle, tmp_path, test_model_path, q2k_draft_path):
    """Greedy, with the draft model: the frozen app's text and rounds equal the source tree's (the same
    llama.cpp libraries, the same loop), which also shows the frozen engine runs its CPU probe child."""
    args = ["generate", "-m", test_model_path, "-md", q2k_draft_path, "-p", PROMPT, "-n", "48", "--json", "-t", "2"]
    frozen = subprocess.run([str(bundle / "tandem"), *args], capture_output=True, text=True, timeout=300,
                            env=_env(tmp_path))
    assert frozen.returncode == 0, frozen.stderr[-2000:]
    source = subprocess.run([sys.executable, "-m", "desktop_app", *args], capture_output=True, text=True,
                            timeout=300, env=_env(tmp_path), cwd=ROOT)
    assert source.returncode == 0, source.stderr[-2000:]
    [a], [b] = json.loads(frozen.stdout)["samples"], json.loads(source.stdout)["samples"]
    assert a["text"].strip() and a["tokens"] == b["tokens"]
    assert [(r["drafted"], r["accepted"]) for r in a["rounds"]] == [(r["drafted"], r["accepted"]) for r in b["rounds"]]
    assert sum(r["accepted"] for r in a["rounds"]) > 0          # it speculated


@pytest.mark.slow
@pytest.mark.network
def test_the_bundle_opens_its_window(bundle, xserver, tmp_path, test_model_path):
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "bundle-window.png"
    shot.unlink(missing_ok=True)
    out = subprocess.run([str(bundle / "tandem"), "-m", test_model_path, "--prompt", PROMPT, "--screenshot", str(shot)],
                         env=_env(tmp_path, DISPLAY=xserver, QT_QPA_PLATFORM="xcb"), capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    image = QImage(str(shot))
    assert not image.isNull() and image.width() >= 800 and image.height() >= 500
    colours = {image.pixel(x, y) for x in range(0, image.width(), 37) for y in range(0, image.height(), 23)}
    assert len(colours) > 20, "the screenshot looks blank"


@pytest.mark.slow
def test_install_sh_installs_and_removes_the_desktop_files(bundle, tmp_path):
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "share"), "TANDEM_BIN_DIR": str(tmp_path / "bin")}
    out = subprocess.run([str(bundle / "install.sh")], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    share = tmp_path / "share"
    entry = share / "applications" / f"{APP_ID}.desktop"
    assert f'Exec="{bundle}/tandem"' in entry.read_text()
    assert (share / "metainfo" / f"{APP_ID}.metainfo.xml").exists()
    for size in (16, 32, 48, 128, 256, 512):
        assert (share / "icons" / "hicolor" / f"{size}x{size}" / "apps" / f"{APP_ID}.png").exists()
    assert os.readlink(tmp_path / "bin" / "tandem") == str(bundle / "tandem")
    if shutil.which("desktop-file-validate"):
        assert _desktop_problems(entry) == ""
    run = subprocess.run([str(tmp_path / "bin" / "tandem"), "--version"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.startswith(f"tandem {__version__}")
    out = subprocess.run([str(bundle / "install.sh"), "--uninstall"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert not [p for p in share.rglob("*") if p.is_file()] and not (tmp_path / "bin" / "tandem").exists()
    # A `tandem` that is not a bundle's link (pip's script, say) is left alone, and left on uninstall.
    (tmp_path / "bin" / "tandem").write_text("#!/bin/sh\necho pip's tandem\n")
    out = subprocess.run([str(bundle / "install.sh")], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "left as it is" in out.stdout
    subprocess.run([str(bundle / "install.sh"), "--uninstall"], env=env, capture_output=True, text=True, timeout=60)
    assert (tmp_path / "bin" / "tandem").read_text().endswith("echo pip's tandem\n")
