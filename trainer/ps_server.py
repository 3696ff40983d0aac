"""Workers and parameter servers of parameter-server training: they serve the chief, which runs `fit`.

In ParameterServerStrategy the chief is the coordinator: it holds no variables and runs no steps itself; it
dispatches steps to the workers (asynchronously) and keeps the variables on the parameter servers. Workers and
parameter servers only run a `tf.distribute.Server`.

Such a server never returns on its own, so each one watches the chief: once the chief's address has answered, a
process exits (code 0) as soon as the address stops answering for a few seconds. That is how the cloud ends the
job (the chief's exit ends it) and it needs no one to stop the servers; `mlsubmit train --local` stops them too.
"""

from __future__ import annotations

import os
import socket
import sys
import time

from trainer.cluster import Cluster


def chief_address(cluster: Cluster) -> tuple[str, int]:
    host, _, port = cluster.spec["chief"][0].rpartition(":")
    return host.strip("[]"), int(port)


def reachable(address: tuple[str, int], timeout: float = 0.5) -> bool:
    try:
        socket.create_connection(address, timeout=timeout).close()
        return True
    except OSError:
        return False


def watch_chief(address: tuple[str, int], interval: float = 0.5, gone_after: float = 3.0, probe=reachable) -> str:
    """Block until the chief, once seen, has not answered for `gone_after` seconds. Returns why it stopped."""
    seen, silent_since = False, None
    while True:
        if probe(address):
            seen, silent_since = True, None
        elif seen:
            silent_since = silent_since or time.monotonic()
            if time.monotonic() - silent_since >= gone_after:
                return f"the chief at {address[0]}:{address[1]} is gone"
        time.sleep(interval)


def serve(cluster: Cluster) -> None:
    """Run this worker's or parameter server's tf.distribute.Server until the chief is gone, then exit 0."""
    from mlsubmit_runtime.chatter import import_tensorflow

    tf = import_tensorflow()  # its C++ start-up lines hidden (mlsubmit_runtime.chatter)

    name = f"{cluster.task_type}-{cluster.task_index}"
    tf.distribute.Server(tf.train.ClusterSpec({k: list(v) for k, v in cluster.spec.items()}),
                         job_name=cluster.task_type, task_index=cluster.task_index, protocol="grpc", start=True)
    address = chief_address(cluster)
    print(f"{name}: serving parameter-server training on {cluster.spec[cluster.task_type][cluster.task_index]} "
          f"for the chief at {address[0]}:{address[1]}", flush=True)
    reason = watch_chief(address)
    print(f"{name}: {reason}; exiting", flush=True)
    sys.stdout.flush()
    os._exit(0)  # the gRPC server has no clean stop; its threads would keep the interpreter alive
