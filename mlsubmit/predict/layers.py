"""Which layer of a .keras file keeps it from loading in this process, and what to do about it.

A .keras archive holds the model's architecture as config.json; Keras rebuilds each layer from it with the
backend this process runs. A layer whose class is not in Keras (one the training code defined and registered) cannot
be rebuilt anywhere the training code is not imported; a built-in layer can still fail where an op it needs does not
exist in this backend. Keras names the layer in its message for the first case, and the failing config for the
second; when it names neither, config.json is read for the first layer whose class is not Keras's own.
"""

from __future__ import annotations

import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

_UNKNOWN_CLASS = re.compile(r"Could not locate class '([^']+)'|Unknown layer: '?([A-Za-z_][\w.>]*)")
_FAILED_CONFIG = re.compile(r"(?:config=|Full object config: )\{'module': (?:None|'[^']*'), 'class_name': '([^']+)'")
_CALLED = re.compile(r"Exception encountered when calling (\w+)\.call\(\)")
_CONTAINERS = {"Sequential", "Functional", "Model", "InputLayer"}
# Keras 3's own markers in config.json (a Lambda's stored code, a tensor between layers): no class of the training's
_SERIALIZED_MARKER = re.compile(r"__\w+__")


@dataclass(frozen=True)
class StrandedLayer:
    """A layer that does not carry across into this process's backend."""

    class_name: str
    layer_name: str | None  # the layer's own name in the model, when config.json gives it
    custom: bool  # its class is not one of Keras's: only the training code can rebuild it

    @property
    def shown(self) -> str:
        return f"{self.class_name} ({self.layer_name!r})" if self.layer_name else self.class_name


def _layer_configs(node):
    """Every serialized object of config.json that names a class, depth first."""
    if isinstance(node, dict):
        if isinstance(node.get("class_name"), str):
            yield node
        for value in node.values():
            yield from _layer_configs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _layer_configs(value)


def _is_keras_own(config: dict) -> bool:
    module = config.get("module")
    return isinstance(module, str) and (module == "keras" or module.startswith("keras."))


def _config_json(model_file: Path):
    """The model's serialized config: config.json of a .keras archive, the `model_config` attribute of an .h5."""
    suffix = Path(model_file).suffix
    try:
        if suffix == ".keras":
            with zipfile.ZipFile(model_file) as archive:
                config = json.loads(archive.read("config.json"))
        elif suffix == ".h5":
            import h5py

            with h5py.File(model_file, "r") as h5:
                text = h5.attrs.get("model_config")
            config = json.loads(text.decode() if isinstance(text, bytes) else text) if text is not None else None
        else:
            return None
        list(_layer_configs(config))  # walked once here: a config nested beyond recursion is not a model's
        return config
    except (zipfile.BadZipFile, KeyError, OSError, ValueError, TypeError, RecursionError):
        return None


def saved_keras_version(model_file: Path) -> str | None:
    """The version of the Keras that wrote the file (metadata.json of a .keras archive, the keras_version attribute
    of an .h5), or None where it does not say."""
    try:
        if Path(model_file).suffix == ".keras":
            with zipfile.ZipFile(model_file) as archive:
                version = json.loads(archive.read("metadata.json")).get("keras_version")
        else:
            import h5py

            with h5py.File(model_file, "r") as h5:
                version = h5.attrs.get("keras_version")
        version = version.decode() if isinstance(version, bytes) else version
    except (zipfile.BadZipFile, KeyError, OSError, ValueError, AttributeError):
        return None
    return version if isinstance(version, str) and re.fullmatch(r"\d+(\.\w+)*", version) else None


def has_lambda(model_file: Path) -> bool:
    """Whether the saved model holds a Lambda layer (whose stored code runs when it is loaded)."""
    return any(node["class_name"] == "Lambda" for node in _layer_configs(_config_json(model_file)))


def _layer_name(config, class_name: str) -> str | None:
    for node in _layer_configs(config):
        if node["class_name"] == class_name and isinstance(node.get("config"), dict):
            name = node["config"].get("name")
            return name if isinstance(name, str) else None
    return None


def stranded_layer(model_file: Path, exc: BaseException) -> StrandedLayer | None:
    """The layer behind `exc`, raised by keras.models.load_model(model_file), or None if no layer is to blame."""
    text = str(exc)
    config = _config_json(model_file)
    unknown = _UNKNOWN_CLASS.search(text)
    if unknown:
        class_name = (unknown.group(1) or unknown.group(2)).split(">")[-1]
        return StrandedLayer(class_name, _layer_name(config, class_name), custom=True)
    custom = next((node for node in _layer_configs(config) if not _is_keras_own(node)
                   and not _SERIALIZED_MARKER.fullmatch(node["class_name"])), None) if config else None
    if custom is not None:
        return StrandedLayer(custom["class_name"], _layer_name(config, custom["class_name"]), custom=True)
    failed = [name for name in _FAILED_CONFIG.findall(text) if name not in _CONTAINERS]
    if failed:  # Keras quotes each config that failed, outermost first: the last is the layer itself
        return StrandedLayer(failed[-1], _layer_name(config, failed[-1]), custom=False)
    called = [name for name in _CALLED.findall(text) if name not in _CONTAINERS]
    if called:  # a layer whose call failed while Keras rebuilt the graph (a Lambda's stored code, typically)
        return StrandedLayer(called[-1], _layer_name(config, called[-1]), custom=False)
    return None
