"""Build Tandem as a one-folder Linux bundle: dist/Tandem/ and dist/Tandem-<version>-linux-<arch>[-portable].tar.gz.

    pip install -e '.[bundle]'         # PyInstaller
    python packaging/build.py          # llama.cpp as installed (pip builds it for this CPU: GGML_NATIVE=ON)
    python packaging/build.py --portable

The bundle carries whatever llama-cpp-python this Python has. pip's default build is GGML_NATIVE=ON:
it runs only on CPUs with this machine's instruction sets (a bundle built on an AVX-512 machine
stops with "illegal instruction" on one without). --portable first builds llama-cpp-python with
GGML_NATIVE=OFF (AVX2/FMA/F16C, x86-64 CPUs since 2013-2015) into its own virtual environment,
build/portable-venv (about 5 minutes on 2 cores, once), and freezes from there. Which build a
bundle carries is in its BUILD-INFO.txt and in `tandem --version`.

The folder holds the executable `tandem` (the window, or any `tandem` command), `install.sh`
(desktop entry, icons, AppStream data and a `tandem` launcher for this user; `--uninstall`), the
icons in the sizes desktops use, rendered from the SVG (icons.py), and BUILD-INFO.txt.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
APP_ID = "io.github.tandem_desktop.Tandem"
LLAMA_PIN = "llama-cpp-python==0.3.36"
PORTABLE_CMAKE_ARGS = "-DGGML_NATIVE=OFF"


def _run(cmd: list[str], **kw) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, **kw)


def portable_python(work: Path) -> Path:
    """A virtual environment with llama-cpp-python built GGML_NATIVE=OFF and Tandem installed."""
    venv = work / "portable-venv"
    python = venv / "bin" / "python"
    marker = venv / "portable-llama.ok"
    if not python.exists():
        _run([sys.executable, "-m", "venv", str(venv)])
    if not marker.exists():
        env = {**os.environ, "CMAKE_ARGS": PORTABLE_CMAKE_ARGS, "FORCE_CMAKE": "1"}
        # --no-cache-dir: pip's wheel cache does not key on CMAKE_ARGS, and would hand back a native build
        _run([str(python), "-m", "pip", "install", "--no-cache-dir", "--force-reinstall", "--no-deps", LLAMA_PIN], env=env)
        marker.write_text(PORTABLE_CMAKE_ARGS + "\n")
    _run([str(python), "-m", "pip", "install", "-q", f"{ROOT}[bundle]"])
    return python


def compiled_features() -> str:
    """The CPU features this llama.cpp was compiled for, from its own system info."""
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode(errors="replace")
    skip = {"LLAMAFILE", "OPENMP", "REPACK", "KLEIDIAI"}
    feats = [part.split("=")[0].strip() for part in info.replace("CPU :", "").split("|")
             if part.strip().endswith("= 1")]
    return " ".join(f for f in feats if f not in skip)


def build_record(llama_build: str) -> dict:
    from desktop_app import __version__

    return {"version": __version__, "built": datetime.date.today().isoformat(), "llama_build": llama_build,
            "cpu_features": compiled_features(), "python": platform.python_version(), "machine": platform.machine()}


def link_llama_libraries(bundle: Path) -> None:
    """A wheel cannot hold symbolic links, so libllama.so, libllama.so.0 and libllama.so.0.5.0 arrive as
    three copies of one file: keep the fully versioned one and make the shorter names links to it, as a
    llama.cpp installed by CMake has them."""
    lib = next(bundle.rglob("llama_cpp/lib"))
    for path in sorted(lib.iterdir(), key=lambda p: len(p.name)):
        if path.is_symlink() or not path.is_file():
            continue
        longer = [q for q in lib.iterdir() if q.name.startswith(path.name + ".") and not q.is_symlink()
                  and q.stat().st_size == path.stat().st_size and q.read_bytes() == path.read_bytes()]
        if longer:
            target = max(longer, key=lambda q: len(q.name))
            path.unlink()
            path.symlink_to(target.name)


def write_share(bundle: Path, work: Path) -> None:
    """Desktop entry, AppStream metadata and icons under bundle/share, and install.sh beside the executable."""
    share = bundle / "share"
    (share / "applications").mkdir(parents=True, exist_ok=True)
    (share / "metainfo").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(HERE / f"{APP_ID}.desktop", share / "applications" / f"{APP_ID}.desktop")
    shutil.copyfile(HERE / f"{APP_ID}.metainfo.xml", share / "metainfo" / f"{APP_ID}.metainfo.xml")
    icons = work / "icons"
    shutil.rmtree(icons, ignore_errors=True)
    _run([sys.executable, str(HERE / "icons.py"), str(icons)], env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
         stdout=subprocess.DEVNULL)
    shutil.copytree(icons, share / "icons", dirs_exist_ok=True)
    shutil.copy2(HERE / "install.sh", bundle / "install.sh")


def write_build_info(bundle: Path, record: dict) -> None:
    from desktop_app.bundle import describe

    lines = [f"Tandem {record['version']}, built {record['built']} with Python {record['python']} for Linux "
             f"{record['machine']}.", "", f"It runs on the CPU only: {describe(record)}."]
    if record["llama_build"] == "native":
        lines += ["On a CPU without those features it stops at once with \"illegal instruction\"; the portable",
                  "bundle (Tandem-*-portable.tar.gz, built with `python packaging/build.py --portable`) runs on any",
                  "x86-64 CPU with AVX2. For a GPU, install Tandem from source with a GPU build of llama-cpp-python",
                  "(the README's \"With a GPU\")."]
    else:
        lines += ["For a GPU, install Tandem from source with a GPU build of llama-cpp-python (the README's",
                  "\"With a GPU\")."]
    lines += ["", "Run it:                ./tandem          (./tandem --help lists the commands)",
              "Add it to your desktop: ./install.sh      (menu entry, icons, and a `tandem` command in ~/.local/bin)",
              "Remove that again:     ./install.sh --uninstall"]
    (bundle / "BUILD-INFO.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--portable", action="store_true", help=f"build llama-cpp-python with {PORTABLE_CMAKE_ARGS} "
                    "first (own venv in the work folder), for CPUs other than this one's")
    ap.add_argument("--dist", default=str(ROOT / "dist"), help="output folder (default: dist/)")
    ap.add_argument("--work", default=str(ROOT / "build"), help="work folder (default: build/)")
    ap.add_argument("--no-tar", action="store_true", help="leave out the .tar.gz")
    ap.add_argument("--llama-build", choices=("native", "portable"), default="native", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    dist, work = Path(args.dist).resolve(), Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    if args.portable:                                # freeze from the portable venv, by this same script
        python = portable_python(work)
        cmd = [str(python), __file__, "--dist", str(dist), "--work", str(work), "--llama-build", "portable"]
        _run(cmd + (["--no-tar"] if args.no_tar else []))
        return 0
    try:
        import PyInstaller  # noqa: F401
    except ImportError:
        raise SystemExit("build: PyInstaller is not installed: pip install -e '.[bundle]'")
    sys.path.insert(0, str(ROOT))
    record = build_record(args.llama_build)
    info = work / "bundle.json"
    info.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    _run([sys.executable, "-m", "PyInstaller", "--noconfirm", "--clean", "--log-level", "WARN",
          "--distpath", str(dist), "--workpath", str(work / "pyinstaller"), str(HERE / "tandem.spec")],
         env={**os.environ, "TANDEM_BUILD_INFO": str(info)})
    bundle = dist / "Tandem"
    link_llama_libraries(bundle)
    write_share(bundle, work)
    write_build_info(bundle, record)
    print(f"build: {bundle}  ({describe_size(bundle)})")
    if not args.no_tar:
        suffix = "-portable" if record["llama_build"] == "portable" else ""
        tar = dist / f"Tandem-{record['version']}-linux-{record['machine']}{suffix}.tar.gz"
        with tarfile.open(tar, "w:gz") as out:
            out.add(bundle, arcname="Tandem")
        print(f"build: {tar}  ({tar.stat().st_size / 1e6:.0f} MB)")
    return 0


def describe_size(folder: Path) -> str:
    total = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    return f"{total / 1e6:.0f} MB"


if __name__ == "__main__":
    sys.exit(main())
