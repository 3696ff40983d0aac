"""Who is at the other end of a connection to 127.0.0.1: the emulator runs users' code (every accepted job), so it
answers only the user who started it (and root), never another local account.

The kernel knows the owner of every TCP socket: /proc/net/tcp (and tcp6) lists each with its addresses and uid.
The client's socket is the one whose local address is the connection's remote one and whose remote address is the
server's. Nothing changes for the user's tools (gcloud, the Python clients, curl): they connect as the user, and a
token would need each of them configured. Where /proc is not there (not Linux), nothing can be told and every
connection is served, as before; where it is, a connection whose owner cannot be found is refused.
"""

from __future__ import annotations

import ipaddress
import os
import socket

_TABLES = ("/proc/net/tcp", "/proc/net/tcp6")


def _address(text: str) -> tuple[str, int]:
    """'0100007F:1F90' -> ('127.0.0.1', 8080): /proc's hex, in host byte order per 32-bit word."""
    host, port = text.split(":")
    raw = bytes.fromhex(host)
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))  # each word little-endian on x86/arm
    address = ipaddress.ip_address(words)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return str(address), int(port, 16)


def owner(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The uid owning the client's end of the connection client -> server; None if it is not listed."""
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
