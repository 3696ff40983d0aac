"""TensorFlow's C++ start-up chatter: recognise the known lines exactly, and keep them out of what users read.

Every process that imports TensorFlow prints lines such as

    WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
    I0000 00:00:1795528115.654430   11197 port.cc:153] oneDNN custom operations are on. You may see …
    I0000 00:00:1795528115.654757   11197 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU …
    E0000 00:00:1795528118.697118   11197 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: …

to file descriptor 2, before `TF_CPP_MIN_LOG_LEVEL` takes effect, so the environment cannot silence them; a
cluster job's replicas add the gRPC server's and the coordination service's connection lines (`Started server with
target: grpc://…`, `… has connected to coordination service`, `Waiting for 1/2 tasks to connect.`, …).
`is_chatter(line)` matches only these known lines, exactly (a real error, even one in the same log format, passes);
`drop_chatter` also drops the task names that follow an `Example stragglers:` line, and nothing else.

One implementation for both halves of the project: mlsubmit (mlsubmit.chatter re-exports this module) drops the
lines from the replica output it prefixes and from the emulator's job logs (`mlsubmit.local.runner`) and hides them
in its own process; the bundled trainer imports TensorFlow through `import_tensorflow()`, so its one-line errors
have nothing in front of them. `quiet_native_startup()` catches file descriptor 2 around the import and replays
every other line it caught. `TF_ENABLE_ONEDNN_OPTS` is left alone on purpose: it changes numerics, not just what is
printed. No import of TensorFlow here.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

_STRAGGLERS = r"Example stragglers:"  # followed by one line per task that has not connected yet
_TASK = re.compile(r"/job:[\w-]+/replica:\d+/task:\d+")
# glog/absl ("I0000 00:00:1795528115.654430   11197 port.cc:153] ": seconds may be Unix time) and TF 2.x before absl ("2024-01-02
# 03:04:05.678901: I tensorflow/core/util/port.cc:113] ")
_PREFIX = r"(?:[IWEF]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ |\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWEF] )[\w/.+-]+:\d+\] "
_MESSAGES = (
    r"oneDNN custom operations are on\. .*",
    r"Could not find cuda drivers on your machine, GPU will not be used\.",
    r"(?:INTERNAL: CUDA error: )?[Ff]ailed call to cuInit: .*",
    r"This TensorFlow binary is optimized to use available CPU instructions in performance-critical operations\.",
    r"Unable to register cu(?:DNN|FFT|BLAS) factory: Attempting to register factory for plugin cu(?:DNN|FFT|BLAS) "
    r"when one has already been registered",
    r"computation placer already registered\. .*",
    r"TF-TRT Warning: Could not find TensorRT",
    # a cluster job's servers and their coordination service connecting (TF_CONFIG with several tasks)
    r"Started server with target: grpc://\S+",
    r"Initializing CoordinationService",
    r"/job:[\w-]+/replica:\d+/task:\d+ has connected to coordination service\. Incarnation: \d+",
    r"Waiting for \d+/\d+ tasks to connect\.",
    _STRAGGLERS,
    r"Coordination agent has successfully connected\.",
    r"Barrier\(WaitForAllTasks::\d+::\d+\) has passed with status: OK",
    r"Memory patch applied: M_TRIM_THRESHOLD=\d+ kb was set\.",
)
_WHOLE_LINES = (
    r"WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR",
    r"To enable the following instructions: [\w ,]+ in other operations, rebuild TensorFlow with the "
    r"appropriate compiler flags\.",
)
_CHATTER = re.compile("|".join([_PREFIX + f"(?:{'|'.join(_MESSAGES)})", *_WHOLE_LINES]))


def is_chatter(line: str) -> bool:
    """Whether `line` (with or without its newline) is one of TensorFlow's known start-up lines."""
    return _CHATTER.fullmatch(line.rstrip("\r\n")) is not None


def drop_chatter(lines: Iterable[str]) -> Iterator[str]:
    """The lines that are not start-up chatter, as they come (for a child process's output): the task names listed
    right after an `Example stragglers:` line go with it; the first other line ends that list."""
    stragglers = False
    for line in lines:
        bare = line.rstrip("\r\n")
        if stragglers and _TASK.fullmatch(bare):
            continue
        stragglers = False
        if is_chatter(bare):
            stragglers = bare.endswith(_STRAGGLERS)
            continue
        yield line


def without_chatter(text: str) -> str:
    """`text` with the start-up lines removed; every other line kept, in order."""
    return "".join(drop_chatter(text.splitlines(keepends=True)))


@contextmanager
def quiet_native_startup() -> Iterator[None]:
    """Catch what is written to file descriptor 2 inside the block (C++ included); afterwards write every line
    of it that is not start-up chatter back to stderr. Use it around `import tensorflow` and its first device
    query, in our own process only."""
    import tempfile

    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no real stderr (embedded, closed): nothing to quiet
        yield
        return
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            try:
                sys.stderr.flush()
            except (OSError, ValueError):
                pass
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            kept = without_chatter(caught.read().decode("utf-8", "replace"))
            if kept:
                os.write(2, kept.encode("utf-8"))


def import_tensorflow():
    """`import tensorflow` with its start-up chatter hidden and every other line it prints kept: the import and
    the first GPU query (where `failed call to cuInit` comes), in this process, with the garbage collector paused
    and what the import made frozen (mlsubmit_runtime.heap). Returns the module."""
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    from mlsubmit_runtime.heap import loading_frameworks

    with quiet_native_startup(), loading_frameworks():  # its millions of objects out of the collector's way
        tf = importlib.import_module("tensorflow")
        tf.config.list_physical_devices("GPU")
    return tf
