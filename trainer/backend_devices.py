"""The devices a JAX or torch run trains on, with the same --gpus / --emulate-devices rules as TensorFlow's.

JAX: every local device Keras lists (GPUs, else the CPU platform's devices, which XLA_FLAGS'
--xla_force_host_platform_device_count=N turns into N when emulating). torch: one device, because Keras 3.15 has
no data-parallel distribution for torch; asking for more than one with --gpus is refused.
"""

from __future__ import annotations

from trainer.backends import ONE_DEVICE_REASON
from trainer.devices import Devices, select
from trainer.errors import TrainerError


def jax_devices(requested: int | None, emulate: int) -> Devices:
    """The JAX devices to train on (JAX_PLATFORMS and XLA_FLAGS were set by trainer.backends.activate)."""
    import keras

    gpus = _jax_gpus(keras) if not emulate else []
    if emulate and len(keras.distribution.list_devices("cpu")) != emulate:
        raise TrainerError(f"invalid value for --emulate-devices: received {emulate}, but JAX was imported before "
                           "the trainer could set XLA_FLAGS; run `python -m trainer.task` in a fresh process")
    names = select(requested, len(gpus), emulate)  # "/gpu:1" → Keras's "gpu:1"
    kind = f"CPU (emulated ×{emulate})" if emulate else ("GPU" if names[0].startswith("/gpu") else "CPU")
    return Devices(tuple(n.lstrip("/") for n in names), kind, len(gpus))


def _jax_gpus(keras) -> list[str]:
    try:
        return keras.distribution.list_devices("gpu")
    except RuntimeError:  # "Unknown backend: 'gpu' requested": a CPU-only jaxlib
        return []


def torch_device(requested: int | None, emulate: int) -> Devices:
    """The one device torch trains on: cuda:0 when a GPU is visible (and not --gpus 0), else the CPU."""
    import torch

    gpus = torch.cuda.device_count()
    if requested is not None and requested > 1:
        select(requested, gpus, emulate)  # too few devices: the same message as on the other backends
        raise TrainerError(f"invalid value for --gpus: received {requested} with --backend torch, but torch "
                           f"trains on one device ({ONE_DEVICE_REASON}); use --gpus 1, or --backend jax or "
                           "tensorflow to train on several")
    on_gpu = gpus > 0 and requested != 0 and not emulate
    return Devices(("cuda:0",) if on_gpu else ("cpu",), "GPU" if on_gpu else "CPU", gpus)
