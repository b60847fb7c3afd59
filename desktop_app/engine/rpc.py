"""llama.cpp RPC: a model's layers on other machines' `ggml-rpc-server`s, Tandem's loop here.

Servers are registered as llama.cpp's own `--rpc` does (common/arg.cpp, add_rpc_devices): the "RPC"
backend's `ggml_backend_rpc_add_server` (found with ggml_backend_reg_get_proc_address) makes one
backend per server, and ggml_backend_register adds it; a model loaded afterwards with layers to offload
(n_gpu_layers) spreads them over every registered device, since Tandem leaves the device list unset.
Registration lasts for the process, so each server is added once.

RPC has no authentication and no encryption: anyone who can reach a server can run code on it and read
what it computes. Tandem only connects, never listens, and only to the hosts the user typed.
"""
from __future__ import annotations

import ctypes
import os
import re
import socket

WARNING = ("llama.cpp RPC is unauthenticated and unencrypted: use it only on a network you trust, with "
           "ggml-rpc-server listening on an address only your machines reach.")
REBUILD = ('This llama.cpp was built without RPC. Rebuild llama-cpp-python with it: '
           'CMAKE_ARGS="-DGGML_RPC=ON" pip install --force-reinstall --no-deps --no-cache-dir '
           'llama-cpp-python==0.3.36')
_ENDPOINT = re.compile(r"^([A-Za-z0-9.-]+):(\d{1,5})$")   # host name or IPv4: llama.cpp's endpoint parser
                                                        # splits at the first colon and aborts on IPv6
_registered: set[str] = set()
ALL_LAYERS = 99              # GPU layers with RPC servers unless set: every layer goes to them (llama.cpp's -ngl 99)
CONNECT_TIMEOUT_S = 5.0


class RpcError(RuntimeError):
    pass


def parse_servers(value: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """"host:port[,host:port...]" as typed, each checked; an empty list is an error."""
    items = value.split(",") if isinstance(value, str) else list(value)
    servers = tuple(s.strip() for s in items if s.strip())
    if not servers:
        raise RpcError("no RPC server given: --rpc takes host:port[,host:port]")
    for s in servers:
        m = _ENDPOINT.match(s)
        if not m or not 0 < int(m.group(2)) < 65536:
            raise RpcError(f"{s!r} is not host:port (for example 192.168.1.20:50052; a host name or an IPv4 "
                           "address: llama.cpp's RPC client takes no IPv6 address)")
    return servers


def _ggml():
    """llama.cpp's ggml library, the very one llama-cpp-python loaded."""
    from llama_cpp import llama_cpp as L

    lib_dir = os.path.dirname(L._lib._name)
    lib = ctypes.CDLL(os.path.join(lib_dir, "libggml.so"))
    lib.ggml_backend_reg_by_name.restype = ctypes.c_void_p
    lib.ggml_backend_reg_by_name.argtypes = [ctypes.c_char_p]
    lib.ggml_backend_reg_get_proc_address.restype = ctypes.c_void_p
    lib.ggml_backend_reg_get_proc_address.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.ggml_backend_register.restype = None
    lib.ggml_backend_register.argtypes = [ctypes.c_void_p]
    return lib


def reachable(server: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Raise RpcError unless something accepts a TCP connection at host:port (llama.cpp's RPC client
    aborts the whole process when it cannot connect, so Tandem asks first)."""
    host, _, port = server.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
            pass
    except OSError as exc:
        why = ("nothing is listening there" if isinstance(exc, ConnectionRefusedError) else
               "that host name does not resolve" if isinstance(exc, socket.gaierror) else
               f"no answer within {timeout:.0f} s" if isinstance(exc, TimeoutError) else str(exc))
        raise RpcError(f"cannot reach the RPC server {server}: {why}. Is ggml-rpc-server running there "
                       f"(ggml-rpc-server -H ADDRESS -p PORT)?") from None


def supported() -> bool:
    from llama_cpp import llama_cpp as L

    return bool(L.llama_supports_rpc())


def register(servers: tuple[str, ...]) -> list[str]:
    """Add each server not yet added as a llama.cpp device; returns those added now."""
    if not supported():
        raise RpcError(REBUILD)
    lib = _ggml()
    reg = lib.ggml_backend_reg_by_name(b"RPC")
    if not reg:
        raise RpcError(REBUILD)
    address = lib.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_rpc_add_server")
    if not address:
        raise RpcError("this llama.cpp's RPC backend lacks ggml_backend_rpc_add_server (a newer llama.cpp "
                       "than Tandem knows?)")
    add_server = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p)(address)
    added = []
    for server in servers:
        reachable(server)                           # llama.cpp aborts the process on a failed connect,
        if server in _registered:                   # at registration and at every later load
            continue
        backend_reg = add_server(server.encode())
        if not backend_reg:
            raise RpcError(f"llama.cpp could not add the RPC server {server}: is ggml-rpc-server running there, "
                           "and reachable?")
        lib.ggml_backend_register(backend_reg)
        _registered.add(server)
        added.append(server)
    return added
