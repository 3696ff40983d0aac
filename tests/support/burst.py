"""A burst of clients against an HTTP server on 127.0.0.1: N connections opened at once, each sending one GET and
reading its whole answer (asyncio, one thread: the clients cost the machine little beside the server).

    took, answered = burst("http://127.0.0.1:8080", "/v1/projects/p/locations/us-central1/customJobs?pageSize=1")
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from urllib.parse import urlparse


@dataclass(frozen=True)
class Burst:
    clients: int
    answered: int  # with a complete HTTP answer (any status) within the deadline
    statuses: tuple[int, ...]
    slowest: float  # seconds from the start to the last answer
    unanswered: int


async def _one(host: str, port: int, path: str, started: float) -> tuple[int, float] | None:
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        answer = await reader.read()  # until the server closes: headers and body
    finally:
        writer.close()
    status = answer.split(b" ", 2)[1] if answer.startswith(b"HTTP/1.") else b""
    return (int(status), time.perf_counter() - started) if status.isdigit() else None


async def _all(endpoint: str, path: str, clients: int, deadline: float) -> Burst:
    url = urlparse(endpoint)
    started = time.perf_counter()
    tasks = [asyncio.ensure_future(_one(url.hostname, url.port, path, started)) for _ in range(clients)]
    done, pending = await asyncio.wait(tasks, timeout=deadline)
    for task in pending:
        task.cancel()
    answers = [task.result() for task in done if task.exception() is None and task.result() is not None]
    return Burst(clients, len(answers), tuple(sorted(status for status, _ in answers)),
                 max((seconds for _, seconds in answers), default=0.0), clients - len(answers))


def burst(endpoint: str, path: str, clients: int = 200, deadline: float = 60.0) -> Burst:
    """Open `clients` connections to `endpoint` at once, each GETting `path`; what came back within `deadline`."""
    return asyncio.run(_all(endpoint, path, clients, deadline))
