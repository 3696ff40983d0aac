"""`--target ray://HOST:PORT` (Ray Client): each replica one actor holding one CPU of a placement group (one bundle
per replica, spread over the nodes where it can be); each actor reports its node's address with a free port, then
runs the launcher in a child process. Cancelling kills the actors and removes the group."""

from __future__ import annotations

import socket
import time
from collections.abc import Sequence
from typing import Any

from mlsubmit.errors import UsageError
from mlsubmit.targets.cluster_base import Engine, NotTheEngine, read_exactly

HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_EMPTY_SETTINGS = bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])  # length 0, type SETTINGS, no flags, stream 0


def check_http2(sock: socket.socket, deadline: float) -> None:
    """Ray Client is gRPC, so HTTP/2: after the client's connection preface the server's first frame is SETTINGS
    (9-byte header: length, type 4, flags, stream 0; a payload of 6-byte settings)."""
    sock.sendall(HTTP2_PREFACE + _EMPTY_SETTINGS)
    head = read_exactly(sock, 9, deadline)
    length, kind, stream = int.from_bytes(head[:3], "big"), head[3], int.from_bytes(head[5:], "big") & 0x7FFFFFFF
    if kind != 4 or stream != 0 or length % 6 or length > 16_384:
        raise NotTheEngine(f"it answered {head!r}, not the HTTP/2 settings a gRPC server starts with")


def _actor_class(launcher: Any) -> Any:
    """The actor, defined here so that Ray ships it by value (the cluster needs no mlsubmit)."""

    class Replica:
        def address(self) -> str:
            import ray

            return f"{ray.util.get_node_ip_address()}:{launcher.free_port()}"

        def run(self, spec: dict) -> int:
            return launcher.run_in_subprocess(spec)

    return Replica


class RayEngine(Engine):
    scheme = "ray"
    module = "ray"
    serves = "a Ray Client server (the head's port 10001 by default)"

    def greet(self, sock: socket.socket, deadline: float) -> None:
        check_http2(sock, deadline)

    def __init__(self, address: str):
        super().__init__(address)
        self.actors: list[Any] = []
        self.group: Any = None
        self.cancelled = False
        self.connected = False

    def connect(self) -> None:
        import logging

        import ray

        for attempt in range(3):  # the head's client proxy sometimes loses the server it starts per connection
            try:
                ray.init(address=f"ray://{self.address}", logging_level=logging.ERROR, log_to_driver=False)
                self.connected = True
                return
            except (ConnectionError, OSError) as err:
                failure = err
                ray.shutdown()
                time.sleep(2.0)
        raise UsageError(f"cannot connect to the Ray cluster at {self.where()}: {str(failure).splitlines()[0]}",
                         hint="ray:// is the Ray Client port of the head (10001 by default)") from None

    def free_slots(self, need: int = 1) -> int:
        import ray

        return int(ray.available_resources().get("CPU", 0))

    def run(self, job_id: str, specs: Sequence[dict[str, Any]]) -> list[int]:
        import ray
        from ray.util.placement_group import placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        from mlsubmit.launcher import shipped

        self.group = placement_group([{"CPU": 1}] * len(specs), strategy="SPREAD", name=job_id)
        ready = self.group.ready()
        while not self.cancelled:
            done, _ = ray.wait([ready], timeout=0.5)
            if done:
                break
        if self.cancelled:
            return []
        actor = ray.remote(num_cpus=1, max_restarts=0)(_actor_class(shipped()))
        self.actors = [actor.options(name=f"{job_id}-{s['role']}-{s['index']}", scheduling_strategy=(
            PlacementGroupSchedulingStrategy(self.group, placement_group_bundle_index=i))).remote()
            for i, s in enumerate(specs)]
        addresses = ray.get([a.address.remote() for a in self.actors])
        runs = [a.run.remote({**spec, "addresses": addresses}) for a, spec in zip(self.actors, specs)]
        pending = list(runs)
        while pending and not self.cancelled:
            _, pending = ray.wait(pending, num_returns=len(pending), timeout=0.5)
        return [] if self.cancelled else ray.get(runs)

    def cancel(self) -> None:
        import ray

        self.cancelled = True
        for actor in self.actors:
            try:
                ray.kill(actor)
            except Exception:  # noqa: BLE001 - already gone
                pass

    def close(self) -> None:
        if not self.connected:
            return
        import ray
        from ray.util.placement_group import remove_placement_group

        if self.group is not None:
            for actor in self.actors:
                try:
                    ray.kill(actor)
                except Exception:  # noqa: BLE001 - ended already
                    pass
            try:
                remove_placement_group(self.group)
            except Exception:  # noqa: BLE001 - the cluster may be gone
                pass
        time.sleep(0)
        ray.shutdown()
        self.connected = False


ENGINE = RayEngine
