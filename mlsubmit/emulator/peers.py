"""Who is at the other end of a connection to 127.0.0.1: the emulator runs users' code (every accepted job), so it
answers only the user who started it (and root), never another local account.

The kernel knows the owner of every TCP socket. The client's socket is the one whose local address is the
connection's remote one and whose remote address is the server's; the kernel is asked for that one socket alone
(`sock_diag`: a netlink request for the exact four addresses, answered from the kernel's socket hash, ~50 µs
whatever the number of connections). Where netlink's socket diagnostics are not there (a kernel without
`inet_diag`), /proc/net/tcp (and tcp6) is read instead — every socket's row, which a burst of 200 connections turns
into 200 reads of a 400-row table each (`owner_from_table`, kept as that fallback and as the benchmark's baseline:
benchmarks/emulator_burst.py). Nothing changes for the user's tools (gcloud, the Python clients, curl): they
connect as the user, and a token would need each of them configured. Where neither is there (not Linux), nothing can
be told and every connection is served, as before; where one is, a connection whose owner cannot be found is refused.
"""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
import struct

_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")
# <linux/netlink.h>, <linux/sock_diag.h>, <linux/inet_diag.h>
_NETLINK_SOCK_DIAG, _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, _NLMSG_ERROR = 4, 20, 1, 2
_ALL_STATES, _NO_COOKIE = 0xFFFFFFFF, 0xFFFFFFFF
_HEADER = struct.Struct("=IHHII")  # nlmsghdr: length, type, flags, sequence, port id
_REQUEST = struct.Struct("=BBBBI")  # inet_diag_req_v2: family, protocol, extensions, pad, states (then the id)
_UID_AT = _HEADER.size + 4 + 48 + 12  # inet_diag_msg: 4 bytes, the 48-byte id, expires, rqueue, wqueue, then uid


class _Unavailable(Exception):
    """The kernel has no socket diagnostics over netlink here: read /proc's table instead."""


def _address(text: str) -> tuple[str, int]:
    """'0100007F:1F90' -> ('127.0.0.1', 8080): /proc's hex, in host byte order per 32-bit word."""
    host, port = text.split(":")
    raw = bytes.fromhex(host)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))  # each word little-endian on x86/arm
    address = ipaddress.ip_address(words)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return str(address), int(port, 16)


def owner_from_table(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid owning the client's end of client -> server, found by reading every row of /proc/net/tcp{,6}; None
    if it is not listed."""
    for table in _TABLES:
        try:
            with open(table, encoding="ascii") as handle:
                next(handle, None)  # the header
                for line in handle:
                    fields = line.split()
                    if len(fields) < 8:
                        continue
                    try:
                        local, remote = _address(fields[1]), _address(fields[2])
                    except ValueError:
                        continue
                    if local == (client[0], client[1]) and remote == (server[0], server[1]):
                        return int(fields[7])
        except OSError:
            continue
    return None


def _plain(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    address = ipaddress.ip_address(host.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        return address.ipv4_mapped  # a dual-stack client's socket is an IPv4 one
    return address


def owner_from_kernel(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid owning the client's end of client -> server, asked of the kernel for that one socket (sock_diag);
    None if there is no such socket. Raises _Unavailable where netlink socket diagnostics are not there."""
    source, destination = _plain(client[0]), _plain(server[0])
    family = socket.AF_INET if source.version == 4 else socket.AF_INET6
    try:
        diag = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG)
    except (OSError, AttributeError) as err:  # AttributeError: no AF_NETLINK (not Linux)
        raise _Unavailable from err
    with diag:
        diag.settimeout(5)
        identity = (struct.pack("!HH", client[1], server[1]) + source.packed.ljust(16, b"\0")
                    + destination.packed.ljust(16, b"\0") + struct.pack("=III", 0, _NO_COOKIE, _NO_COOKIE))
        body = _REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, _ALL_STATES) + identity
        try:
            diag.sendto(_HEADER.pack(_HEADER.size + len(body), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, 1, 0) + body,
                        (0, 0))
            answer = diag.recv(8192)
        except OSError as err:
            raise _Unavailable from err
    kind = _HEADER.unpack_from(answer)[1] if len(answer) >= _HEADER.size else _NLMSG_ERROR
    if kind == _NLMSG_ERROR:
        error = -struct.unpack_from("=i", answer, _HEADER.size)[0] if len(answer) >= _HEADER.size + 4 else 0
        if error in (errno.ENOENT, 0):
            return None
        raise _Unavailable(os.strerror(error))  # e.g. no inet_diag module: EINVAL, EOPNOTSUPP
    return struct.unpack_from("=I", answer, _UID_AT)[0] if len(answer) >= _UID_AT + 4 else None


_kernel_answers = True  # until it says it cannot (then for the rest of this process)


def owner(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid owning the client's end of the connection client -> server; None if there is no such socket."""
    global _kernel_answers
    if _kernel_answers:
        try:
            return owner_from_kernel(client, server)
        except _Unavailable:
            _kernel_answers = False
    return owner_from_table(client, server)


def can_tell() -> bool:
    return os.path.exists(_TABLES[0])


def allowed(connection: socket.socket) -> bool:
    """Whether the peer of this accepted connection is this process's user or root (True where nothing can be
    told)."""
    if not can_tell():
        return True
    try:
        client, server = connection.getpeername()[:2], connection.getsockname()[:2]
    except OSError:
        return False
    uid = owner((str(client[0]), int(client[1])), (str(server[0]), int(server[1])))
    return uid is not None and uid in (os.getuid(), 0)
