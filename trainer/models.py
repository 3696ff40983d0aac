"""The model zoo: name → factory(keras, input_shape, num_classes) → an uncompiled keras.Model.

The architectures of the recipes this project grew from. Each adapts to the data: convolutions fall back to
`same` padding and pooling is skipped once the feature map is too small for them, so every model also builds for
8×8 digits or a 1-D feature vector. Only APIs shared by Keras 3 and tf_keras are used, so the same code serves the
one-machine route (Keras 3) and the cluster route (tf_keras). The softmax output is float32 under every dtype
policy, so mixed precision (--precision mixed_*) computes the loss from float32 probabilities.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ModelInfo:
    factory: Callable
    augment: bool  # random flip/crop in the input pipeline, as CIFAR recipes do
    description: str


class _Stack:
    """Appends layers to a list while tracking the spatial size, so each model adapts to the input shape."""

    def __init__(self, keras, input_shape):
        self.k = keras.layers
        self.layers = [keras.Input(shape=tuple(input_shape))]
        self.size = min(input_shape[:2]) if len(input_shape) == 3 else 0

    def conv(self, filters: int, kernel: int, padding: str = "valid"):
        if padding == "valid" and self.size - kernel + 1 < 2:
            padding = "same"  # too small to shrink further
        self.layers.append(self.k.Conv2D(filters, kernel, padding=padding, activation="relu"))
        if padding == "valid":
            self.size -= kernel - 1

    def pool(self):
        if self.size >= 2:
            self.layers.append(self.k.MaxPooling2D(2))
            self.size //= 2

    def add(self, layer):
        self.layers.append(layer)


def _need_image(name: str, input_shape) -> None:
    if len(input_shape) != 3:
        from trainer.errors import TrainerError

        raise TrainerError(f"model {name!r} needs images of shape HxWxC; the data has samples of shape "
                           f"{tuple(input_shape)}; use --model dense for flat features")


def cifar10_vgg(keras, input_shape, num_classes):
    """VGG-like CNN of the CIFAR-10 multi-backend recipe."""
    _need_image("cifar10_vgg", input_shape)
    s = _Stack(keras, input_shape)
    for filters in (32, 64):
        s.conv(filters, 3, "same")
        s.conv(filters, 3)
        s.pool()
        s.add(s.k.Dropout(0.25))
    s.add(s.k.Flatten())
    s.add(s.k.Dense(512, activation="relu"))
    s.add(s.k.Dropout(0.5))
    s.add(s.k.Dense(num_classes, activation="softmax", dtype="float32"))
    return keras.Sequential(s.layers, name="cifar10_vgg")


def mnist_cnn(keras, input_shape, num_classes):
    """The Cloud ML Engine multi-GPU recipe's CNN."""
    _need_image("mnist_cnn", input_shape)
    s = _Stack(keras, input_shape)
    s.conv(128, 3)
    s.conv(128, 3)
    s.pool()
    for _ in range(3):
        s.conv(128, 3)
    s.add(s.k.Flatten())
    s.add(s.k.Dense(128, activation="relu"))
    s.add(s.k.Dense(num_classes, activation="softmax", dtype="float32"))
    return keras.Sequential(s.layers, name="mnist_cnn")


def mnist_convnet(keras, input_shape, num_classes):
    """The parameter-server recipe's convnet."""
    _need_image("mnist_convnet", input_shape)
    s = _Stack(keras, input_shape)
    s.conv(32, 5, "same")
    s.pool()
    s.conv(64, 5, "same")
    s.pool()
    s.add(s.k.Flatten())
    s.add(s.k.Dense(1024, activation="relu"))
    s.add(s.k.Dropout(0.4))
    s.add(s.k.Dense(num_classes, activation="softmax", dtype="float32"))
    return keras.Sequential(s.layers, name="mnist_convnet")


def dense(keras, input_shape, num_classes):
    """A small MLP baseline (no dropout: its training is deterministic for a given seed and global batch)."""
    layers = keras.layers
    return keras.Sequential([
        keras.Input(shape=tuple(input_shape)),
        layers.Flatten(),
        layers.Dense(64, activation="relu"),
        layers.Dense(num_classes, activation="softmax", dtype="float32"),
    ], name="dense")


MODELS: dict[str, ModelInfo] = {
    "cifar10_vgg": ModelInfo(cifar10_vgg, True, "VGG-like CNN (CIFAR-10 multi-backend recipe)"),
    "mnist_cnn": ModelInfo(mnist_cnn, False, "5×conv128 CNN (Cloud ML Engine multi-GPU recipe)"),
    "mnist_convnet": ModelInfo(mnist_convnet, False, "conv32/conv64 5×5 + dense 1024 (parameter-server recipe)"),
    "dense": ModelInfo(dense, False, "small MLP baseline"),
}


def build_model(keras, name: str, input_shape, num_classes: int):
    """Build the named architecture for this input shape and class count."""
    return MODELS[name].factory(keras, tuple(input_shape), int(num_classes))
