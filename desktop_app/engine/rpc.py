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
import re
import socket
import struct

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
# The RPC protocol of the llama.cpp in the pinned llama-cpp-python (0.3.36: ggml/include/ggml-rpc.h,
# RPC_PROTO_MAJOR_VERSION 7, RPC_PROTO_MINOR_VERSION 0), and its HELLO exchange (ggml-rpc.cpp:
# negotiate_hello): command byte 14, a 64-bit request size, rpc_msg_hello_req (24 bytes of connection
# capabilities; zeros ask for no transport upgrade); the answer is a 64-bit size, then
# rpc_msg_hello_rsp (major, minor, patch, padding, 24 bytes of capabilities).
PROTOCOL = (7, 0)
_HELLO = 14
_CAPS = 24


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


def reachable(server: str, timeout: float = CONNECT_TIMEOUT_S, handshake: bool = True) -> None:
    """Raise RpcError unless a ggml-rpc-server that speaks this llama.cpp's RPC protocol answers at
    host:port. llama.cpp's RPC client aborts the whole process when it cannot connect, when the answer
    to its HELLO is malformed (another service on that port) and when the versions differ, so Tandem
    asks first, with the same HELLO. A ggml-rpc-server serves one connection at a time, so while this
    process holds one to it (a model loaded there) only the TCP connection is tried (handshake=False)."""
    host, _, port = server.rpartition(":")
    try:
        sock = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
    except OSError as exc:
        why = ("nothing is listening there" if isinstance(exc, ConnectionRefusedError) else
               "that host name does not resolve" if isinstance(exc, socket.gaierror) else
               f"no answer within {timeout:.0f} s" if isinstance(exc, TimeoutError) else str(exc))
        raise RpcError(f"cannot reach the RPC server {server}: {why}. Is ggml-rpc-server running there "
                       f"(ggml-rpc-server -H ADDRESS -p PORT)?") from None
    with sock:
        if not handshake:
            return
        try:
            sock.settimeout(timeout)
            sock.sendall(struct.pack("<BQ", _HELLO, _CAPS) + bytes(_CAPS))
            answer = _read(sock, 8 + 4 + _CAPS)
        except TimeoutError:
            raise RpcError(f"{server} accepted the connection but did not answer the RPC handshake within "
                           f"{timeout:.0f} s: a ggml-rpc-server busy with another client (it serves one at a "
                           "time), or another service on that port.") from None
        except OSError:
            answer = b""                              # closed on us: not the handshake it expected
    size = struct.unpack("<Q", answer[:8])[0] if len(answer) >= 8 else None
    if size != 4 + _CAPS or len(answer) < 8 + 4 + _CAPS:
        raise RpcError(f"{server} does not answer as a ggml-rpc-server of this llama.cpp (its answer to the RPC "
                       f"handshake was {'nothing' if not answer else 'not one'}): is another service on that "
                       f"port, or a ggml-rpc-server of another llama.cpp version?")
    major, minor, patch = answer[8:11]
    if major != PROTOCOL[0] or minor > PROTOCOL[1]:
        raise RpcError(f"the ggml-rpc-server at {server} speaks RPC protocol {major}.{minor}.{patch}, and this "
                       f"llama.cpp speaks {PROTOCOL[0]}.{PROTOCOL[1]}: run a ggml-rpc-server built from the same "
                       "llama.cpp as Tandem's llama-cpp-python (0.3.36), as scripts/build_llama_tools.py does.")


def _read(sock: socket.socket, n: int) -> bytes:
    """Up to n bytes: fewer when the other end closes first."""
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            break
        data += chunk
    return data


def supported() -> bool:
    from llama_cpp import llama_cpp as L

    return bool(L.llama_supports_rpc())


def register(servers: tuple[str, ...]) -> list[str]:
    """Add each server not yet added as a llama.cpp device; returns those added now."""
    if not supported():
        raise RpcError(REBUILD)
    from desktop_app.engine import backend

    lib = backend.ggml_library()
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
        # llama.cpp aborts the process on a failed connect or handshake, at registration and at every
        # later load; once registered, its connection there may be open (the server is then busy)
        reachable(server, handshake=server not in _registered)
        if server in _registered:
            continue
        backend_reg = add_server(server.encode())
        if not backend_reg:
            raise RpcError(f"llama.cpp could not add the RPC server {server}: is ggml-rpc-server running there, "
                           "and reachable?")
        lib.ggml_backend_register(backend_reg)
        _registered.add(server)
        added.append(server)
    return added
