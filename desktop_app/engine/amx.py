"""Repacked weights without AMX, where llama.cpp's AMX kernels fault (llama.cpp issue #20824).

llama.cpp offers two repacked weight layouts on an Intel Xeon with AMX: AMX's, tried first, and
CPU_REPACK's (AVX2/AVX-512 kernels). On virtualised Xeons the AMX path faults on the first decode,
while CPU_REPACK works there and is faster than no repacking at all (a 2-core Xeon with AMX, the
demo target: checks of 5 and 17 tokens 1.3–1.6× and 1.1–1.4× as fast, single tokens 1.02–1.15×:
README, "Weight repacking").
llama.cpp has no switch for AMX alone, but it offers the AMX layout only to a process the kernel
lets use AMX tiles (`arch_prctl(ARCH_REQ_XCOMP_PERM)`, asked when the CPU backend first lists its
layouts). A seccomp filter that refuses that one request (Linux, x86-64) keeps AMX out of this
process and of every process it starts: llama.cpp then lists CPU_REPACK alone.

`keep_out()` installs the filter (once; it cannot be lifted) and says whether AMX is out of reach.
The filter must come before llama.cpp first lists its layouts (at a process's first model load with
repacking or first decode): once it has listed AMX it asks again at every matrix product, so a
filter installed then would only fill stderr. So where this process already holds AMX permission,
no filter is installed and `keep_out()` says False: the caller loads without repacking instead.
The filter also sets the process's no-new-privileges flag (seccomp needs it), as it does for every
program this process starts: set-user-ID programs then run without their privileges.
`tandem --without-amx TOOL ARGS…` (`command`) runs a program under the filter: one of llama.cpp's own
tools, or the CPU probe's child (engine/repack.py).
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import struct
import sys

from desktop_app import machine

_ARCH_GET_XCOMP_PERM, _ARCH_REQ_XCOMP_PERM = 0x1022, 0x1023
_XFEATURE_XTILEDATA = 18
_NR_ARCH_PRCTL, _NR_SECCOMP = 158, 317             # x86-64
_AUDIT_ARCH_X86_64 = 0xC000003E
KEPT_OUT_ENV = "TANDEM_AMX_KEPT_OUT"                # "1" in a process under the filter, and its children
_installed = False
_kept_out: bool | None = None          # keep_out's answer, once given


def _linux_x86_64() -> bool:
    return sys.platform == "linux" and platform.machine() == "x86_64"


def possible() -> bool:
    """This is an x86-64 Linux machine whose CPU has AMX: the one place the filter applies."""
    return _linux_x86_64() and "amx_tile" in machine.cpu_flags()


def kept_out_here() -> bool:
    """This process runs under the filter (installed here, or inherited from the process that started it)."""
    return _installed or os.environ.get(KEPT_OUT_ENV) == "1"


def _filter_program() -> bytes:
    """Classic BPF over seccomp_data (nr at 0, arch at 4, args[0] at 16): arch_prctl asking for AMX
    permission fails with EPERM; every other call is allowed."""
    ld, jeq, ret = 0x20, 0x15, 0x06                 # BPF_LD|W|ABS, BPF_JMP|JEQ|K, BPF_RET|K
    allow, eperm = 0x7FFF0000, 0x00050000 | 1        # SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO | EPERM
    program = [(ld, 0, 0, 4), (jeq, 0, 5, _AUDIT_ARCH_X86_64),
               (ld, 0, 0, 0), (jeq, 0, 3, _NR_ARCH_PRCTL),
               (ld, 0, 0, 16), (jeq, 0, 1, _ARCH_REQ_XCOMP_PERM),
               (ret, 0, 0, eperm), (ret, 0, 0, allow)]
    return b"".join(struct.pack("HBBI", *op) for op in program)


def _amx_permitted(libc) -> bool:
    """This process already holds AMX permission (ggml asked for it: llama.cpp has listed AMX)."""
    mask = ctypes.c_uint64()
    if libc.syscall(_NR_ARCH_PRCTL, _ARCH_GET_XCOMP_PERM, ctypes.byref(mask)) != 0:
        return False                                 # (a kernel without AMX support: none to hold)
    return bool(mask.value >> _XFEATURE_XTILEDATA & 1)


def install_filter() -> bool:
    """Refuse AMX permission to every thread of this process and its children. False where it could not
    be installed (another OS or CPU, a kernel without seccomp) or came too late (AMX already permitted)."""
    global _installed
    if _installed:
        return True
    if not _linux_x86_64():
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    if _amx_permitted(libc):
        return False
    program = _filter_program()
    code = ctypes.create_string_buffer(program, len(program))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = SockFprog(len(program) // 8, ctypes.addressof(code))
    if libc.prctl(38, 1, 0, 0, 0) != 0:               # PR_SET_NO_NEW_PRIVS, as an unprivileged filter needs
        return False
    # seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog): every thread, not only this one
    if libc.syscall(_NR_SECCOMP, 1, 1, ctypes.byref(prog)) != 0:
        return False
    _installed = True
    os.environ[KEPT_OUT_ENV] = "1"
    return True


@contextlib.contextmanager
def _quiet_stderr():
    """ggml prints "AMX is not ready to be used!" when refused; the user has nothing to do about it."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def extra_buffer_types() -> list[str]:
    """The repacked layouts llama.cpp's CPU backend offers this process ("AMX", "CPU_REPACK", …). The
    first call decides them for the life of the process. Raises OSError where ggml cannot be opened."""
    from desktop_app.engine import backend

    backend.init_backend()
    lib = backend.ggml_library()
    device = lib.ggml_backend_dev_by_type(0)                    # GGML_BACKEND_DEVICE_TYPE_CPU
    address = lib.ggml_backend_reg_get_proc_address(lib.ggml_backend_dev_backend_reg(device),
                                                    b"ggml_backend_dev_get_extra_bufts") if device else None
    if not address:
        return []
    listing = ctypes.CFUNCTYPE(ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)(address)
    with _quiet_stderr():
        types = listing(device)
    names, i = [], 0
    while types and types[i]:
        names.append(lib.ggml_backend_buft_name(types[i]).decode())
        i += 1
    return names


def keep_out() -> bool:
    """Keep AMX out of this process: True where llama.cpp now offers no AMX layout, so that repacked
    weights take CPU_REPACK's; False where it offers AMX all the same (this process held AMX
    permission before: llama.cpp had listed its layouts) or the filter could not be installed. The
    first answer holds for the life of the process (llama.cpp lists its layouts once)."""
    global _kept_out
    if _kept_out is None:
        try:
            _kept_out = install_filter() and "AMX" not in extra_buffer_types()
        except OSError:
            _kept_out = False
    return _kept_out


def command(tool: list[str]) -> list[str]:
    """The command line that starts `tool` (a program and its arguments) under the filter."""
    from desktop_app.child import tandem_command

    return tandem_command("--without-amx", *tool)


def main(argv: list[str]) -> int:
    """`tandem --without-amx TOOL ARGS…`: this process becomes TOOL, under the filter."""
    if not argv:
        print("usage: tandem --without-amx TOOL [ARGS…]", file=sys.stderr)
        return 2
    if not install_filter():
        print("could not keep AMX out (not x86-64 Linux, or no seccomp): running the tool as it is", file=sys.stderr)
    env = dict(os.environ)
    if getattr(sys, "frozen", False):                # (a PyInstaller bundle's library path is its own)
        original = env.pop("LD_LIBRARY_PATH_ORIG", None)
        env.pop("LD_LIBRARY_PATH", None)
        if original is not None:
            env["LD_LIBRARY_PATH"] = original
    try:
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        print(f"could not start {argv[0]}: {exc}", file=sys.stderr)
    return 127
