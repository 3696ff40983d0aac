"""Emulated devices: `mlsubmit train --local --gpus N` on a machine with fewer GPUs offers N logical CPU devices.

mlsubmit never adds arguments to a trainer's command line. It sets MLSUBMIT_EMULATE_DEVICES=N in each replica's
environment instead; a trainer that wants to rehearse its N-device path reads it here and splits the CPU:

    from mlsubmit_runtime.devices import emulate, emulated_devices
    names = emulate(emulated_devices())        # before TensorFlow runs any op; [] when nothing is asked
    strategy = tf.distribute.MirroredStrategy(names or None)

A trainer that ignores the variable trains on what the machine has, as it would anywhere. On Keras's JAX
backend, XLA makes the N host devices instead, from variables set before JAX is imported:

    os.environ.update(jax_emulation_environment(emulated_devices()))   # then: import keras / jax
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from mlsubmit_runtime import EMULATE_DEVICES_VARIABLE
from mlsubmit_runtime.errors import InputError


def emulated_devices(env: Mapping[str, str] | None = None) -> int:
    """The device count MLSUBMIT_EMULATE_DEVICES asks for (0 when unset or empty). Raises InputError if not ≥ 0."""
    text = (os.environ if env is None else env).get(EMULATE_DEVICES_VARIABLE, "").strip()
    if not text:
        return 0
    if not text.isdigit():
        raise InputError(f"invalid value for {EMULATE_DEVICES_VARIABLE}: received {text!r}; expected a whole "
                         "number of devices ≥ 0")
    return int(text)


def jax_emulation_environment(count: int, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables that give JAX `count` CPU devices: XLA_FLAGS (`env`'s own flags kept, any earlier device count
    replaced) and JAX_PLATFORMS=cpu. Set them before JAX is imported. {} when `count` is 0."""
    if count <= 0:
        return {}
    flag = "--xla_force_host_platform_device_count="
    existing = [f for f in (os.environ if env is None else env).get("XLA_FLAGS", "").split() if not f.startswith(flag)]
    return {"XLA_FLAGS": " ".join([*existing, f"{flag}{count}"]), "JAX_PLATFORMS": "cpu"}


def emulate(count: int) -> list[str]:
    """Split the CPU into `count` logical devices and hide real GPUs (before any TensorFlow op); their names.

    Returns [] and changes nothing when `count` is 0.
    """
    if count <= 0:
        return []
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):
        tf.config.set_visible_devices([], "GPU")
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * count)
    return [f"/cpu:{i}" for i in range(count)]
