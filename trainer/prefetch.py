"""A bounded, ordered producer: batch i, i+1, … made ahead of the step by a few threads.

The JAX and torch routes' numpy batches (gather, flip and crop) are made here while the devices run the step
before: `workers` threads produce the next `depth` batches of the stream in order, so memory holds at most `depth`
batches besides the one in use, and which batch comes next never depends on thread timing (every batch is a pure
function of its index). numpy's copies and fancy indexing release the GIL, so the threads use the host's cores.

Keras' own `PyDataset(workers=N)` does the same with a thread pool, but stops and restarts it (draining its queue)
at every epoch and does not say how long the step waited; this one runs across epochs and counts the wait (the
time the training loop was blocked on a batch that was not ready yet): benchmarks/input_pipeline.py measures both.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor


class Prefetcher:
    """`get(i)` returns produce(i); asking for the index after the last one finds it made already."""

    def __init__(self, produce: Callable[[int], object], *, workers: int, depth: int | None = None):
        self._produce = produce
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="trainer-input")
        self._depth = depth or 2 * workers
        self._ahead: deque[tuple[int, Future]] = deque()
        self._next = 0
        self.waited = 0.0  # seconds get() blocked on a batch that was not ready

    def get(self, index: int):
        if not self._ahead or self._ahead[0][0] != index:  # not the next of the stream: start again from here
            self._cancel()
            self._next = index
        self._fill()
        _, future = self._ahead.popleft()
        self._fill()  # keep `depth` batches in the making while this one is used
        if not future.done():
            started = time.perf_counter()
            result = future.result()
            self.waited += time.perf_counter() - started
            return result
        return future.result()

    def _fill(self) -> None:
        while len(self._ahead) < self._depth:
            self._ahead.append((self._next, self._pool.submit(self._produce, self._next)))
            self._next += 1

    def _cancel(self) -> None:
        while self._ahead:
            self._ahead.popleft()[1].cancel()

    def close(self) -> None:
        """Stop making batches: queued ones are dropped, running ones finish; the threads end."""
        self._cancel()
        self._pool.shutdown(wait=True, cancel_futures=True)
