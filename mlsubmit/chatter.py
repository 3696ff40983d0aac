"""TensorFlow's C++ start-up chatter: recognise the known lines exactly, and keep them out of what users read.

Every process that imports TensorFlow prints lines such as

    WARNING: All log messages before absl::InitializeLog() is called are written to STDERR
    I0000 00:00:1795528115.654430   11197 port.cc:153] oneDNN custom operations are on. You may see …
    I0000 00:00:1795528115.654757   11197 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU …
    E0000 00:00:1795528118.697118   11197 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: …

to file descriptor 2, before `TF_CPP_MIN_LOG_LEVEL` takes effect, so the environment cannot silence them.
`is_chatter(line)` matches only these known start-up lines (a real error, even one in the same log format,
passes); the replica output we prefix and the emulator's job logs drop them (`mlsubmit.local.runner`), and our own
process hides them with `quiet_native_startup()` around the import, replaying every other line it caught.
`TF_ENABLE_ONEDNN_OPTS` is left alone on purpose: it changes numerics, not just what is printed.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

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
    """The lines that are not start-up chatter, as they come (for a child process's output)."""
    return (line for line in lines if not is_chatter(line))


def without_chatter(text: str) -> str:
    """`text` with the start-up lines removed; every other line kept, in order."""
    return "".join(line for line in text.splitlines(keepends=True) if not is_chatter(line))


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
