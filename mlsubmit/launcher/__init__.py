"""The one replica launcher every target uses: `replica.py` (standard library only) is shipped as source to the
machine, pod, executor, worker or actor that runs a replica and started there (`python3 replica.py SPEC.json`);
`specs` builds its spec from a JobSpec on the submitting side.

    from mlsubmit.launcher import source
    source()  # the text of replica.py, for `python3 -c "$(…)"` or a ConfigMap
"""

from __future__ import annotations

from pathlib import Path

PATH = Path(__file__).with_name("replica.py")


def source() -> str:
    """The launcher's source, runnable on its own by any Python 3.8+ (no mlsubmit needed)."""
    return PATH.read_text(encoding="utf-8")


def shipped():
    """The launcher's functions as the engines ship them: compiled from its source in a module of their own that
    no worker has to import (cloudpickle then sends them by value), with the source itself for `run_in_subprocess`.
    Its `free_port()` and `run_in_subprocess(spec)` need nothing but the standard library on the worker."""
    import types

    module = types.ModuleType("mlsubmit_shipped_launcher")
    text = source()
    exec(compile(text, str(PATH), "exec"), module.__dict__)
    module.LAUNCHER_SOURCE = text
    return module
