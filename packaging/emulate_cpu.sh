#!/usr/bin/env bash
# Run a built bundle's `tandem` as on an older CPU, under QEMU's user-mode emulation (Debian: qemu-user):
#
#   packaging/emulate_cpu.sh Haswell generate -m smollm2-135m -p "Hi" -n 8
#
# CPU is a QEMU CPU model: Haswell has AVX2, FMA and F16C and no AVX-512, like Intel's current
# desktop CPUs. A llama.cpp built for another CPU's instruction sets stops with "Illegal instruction" (exit
# 132): the pip-installed (GGML_NATIVE=ON) one built on an AVX-512 machine does; the portable bundle's
# (packaging/build.py --portable) must not.
#
# PyInstaller's bootloader starts the bundle a second time with LD_LIBRARY_PATH set; that second start
# would run on the real CPU, outside the emulator. So it is done here: the environment the bootloader
# sets for its second start, then the bundle under QEMU. Child processes would run on the real CPU:
# `tandem generate` starts none, except the repacking probe on a machine without a cached verdict
# (engine/repack.py); TANDEM_NO_REPACK=1 skips it. The _PYI_* variables are PyInstaller's own, not a public
# interface (checked with the PyInstaller that pyproject.toml's bundle extra installs).
set -euo pipefail
cpu=${1:?usage: emulate_cpu.sh CPU TANDEM-ARGS...}
shift
here=$(cd "$(dirname "$0")/.." && pwd)
bundle=${TANDEM_BUNDLE:-$here/dist/Tandem}
command -v qemu-x86_64 >/dev/null || { echo "qemu-x86_64 not found (Debian: apt-get install qemu-user)" >&2; exit 2; }
[ -x "$bundle/tandem" ] || { echo "no bundle at $bundle (python packaging/build.py --portable)" >&2; exit 2; }
exec env LD_LIBRARY_PATH="$bundle/_internal" _PYI_ARCHIVE_FILE="$bundle/tandem" _PYI_PARENT_PROCESS_LEVEL=-1 \
    qemu-x86_64 -cpu "$cpu" "$bundle/tandem" "$@" 2> >(grep --line-buffered -v "warning: TCG doesn't support" >&2)
