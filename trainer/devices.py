"""Find the devices to train on: the machine's GPUs, or N logical CPU devices with --emulate-devices N (or
MLSUBMIT_EMULATE_DEVICES=N, which `mlsubmit train --local --gpus N` sets on a machine without N GPUs).

`--emulate-devices N` splits the CPU into N logical devices before TensorFlow runs any op, so the N-replica path
(MirroredStrategy, the global batch split across replicas, mirrored variables) really runs on a machine without
GPUs. While emulating, real GPUs are hidden so the run is the same everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainer.errors import TrainerError


@dataclass(frozen=True)
class Devices:
    names: tuple[str, ...]  # the devices to train on, e.g. ("/gpu:0", "/gpu:1") or ("/cpu:0",)
    kind: str  # "GPU", "CPU" or "CPU (emulated ×N)"
    gpus_found: int

    @property
    def count(self) -> int:
        return len(self.names)


def select(requested: int | None, gpus_found: int, emulated: int) -> tuple[str, ...]:
    """Pure choice of device names: `requested` None means all; raises TrainerError when too few exist."""
    if emulated:
        available = tuple(f"/cpu:{i}" for i in range(emulated))
        what = f"{emulated} emulated devices"
    else:
        available = tuple(f"/gpu:{i}" for i in range(gpus_found))
        what = f"{gpus_found} GPU{'s' if gpus_found != 1 else ''}"
    if requested is None:
        return available or ("/cpu:0",)
    if requested == 0:
        return ("/cpu:0",)
    if requested > len(available):
        fewer = f"--gpus {len(available)} or fewer" if available else "--gpus 0 (the CPU)"
        raise TrainerError(f"invalid value for --gpus: received {requested}, but this machine has {what}; use "
                           f"--gpus auto, {fewer}, or --emulate-devices {requested} to rehearse the multi-device "
                           "path on the CPU")
    return available[:requested]


def setup(requested: int | None, emulate: int) -> Devices:
    """Configure TensorFlow's devices (must run before any TensorFlow op) and select the ones to train on."""
    from mlsubmit_runtime.chatter import import_tensorflow
    from mlsubmit_runtime.devices import emulate as split_cpu

    tf = import_tensorflow()  # its C++ start-up lines hidden: a bad --gpus is one line with nothing before it

    gpus = tf.config.list_physical_devices("GPU")
    if emulate:
        split_cpu(emulate)
    else:
        for gpu in gpus:  # allocate as needed, so several replicas can share a GPU in local runs
            try:
                tf.config.experimental.set_memory_growth(gpu, True)
            except (ValueError, RuntimeError):
                pass
    names = select(requested, len(gpus), emulate)
    kind = f"CPU (emulated ×{emulate})" if emulate else ("GPU" if names[0].startswith("/gpu") else "CPU")
    return Devices(names, kind, len(gpus))
