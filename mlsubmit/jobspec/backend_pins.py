"""A Keras backend's packages pinned to what pip resolves on the job's image, before a `--backends` job is sent.

The cloud installs a job's packages with a plain `pip install` on the prebuilt image, which treats the image's
packages as replaceable: asked for `jax`, it takes the newest JAX, and with it an ml-dtypes ≥ 0.5 and a numpy 2 that
TensorFlow 2.17 (ml-dtypes < 0.5, numpy < 2) cannot use. So before anything is uploaded, mlsubmit resolves the backend's requirements (with the trainer's) by pip's
own resolver on the image's Python with the image's framework pins as constraints (mlsubmit.images.check),
and stages the backend's requirements sdist with exact pins of what that resolution chose (`jax==0.5.3` on
`tf-cpu.2-17.py310` on 2026-11-24, where the newest is 0.10.2): the cloud's pip then has nothing left to choose.

A requirement the image cannot take is one line (both sides named); where the resolution cannot be done (offline,
no table entry for the image) the table's unpinned requirements go, and that is said. A resolution is kept by its
inputs under `$MLSUBMIT_IMAGES/<image>/backend-pins/` (pip's answer for the same inputs only changes with new
releases, and a kept pin stays a pin that resolved on that image).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from mlsubmit.errors import UsageError
from mlsubmit.jobspec import keras_backends


def _cache_file(image_name: str, requirements: Sequence[str], python: str) -> Path:
    from mlsubmit.images.envs import images_home

    key = hashlib.sha256(json.dumps([image_name, python, sorted(requirements)]).encode()).hexdigest()[:32]
    return images_home() / image_name / "backend-pins" / f"{key}.json"


def pin(needs: Sequence[str], resolved: dict[str, str]) -> tuple[str, ...]:
    """The backend's requirements with the versions pip chose: `jax[cuda12]` + {jax: 0.5.3} → `jax[cuda12]==0.5.3`
    (pure; markers and extras kept, any range replaced)."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pinned = []
    for text in needs:
        requirement = Requirement(text)
        extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
        marker = f"; {requirement.marker}" if requirement.marker else ""
        version = resolved.get(canonicalize_name(requirement.name))
        pinned.append(f"{requirement.name}{extras}=={version}{marker}" if version else text)  # carried: as it was
    return tuple(pinned)


def pins_on_image(spec, backend: str, kinds: Sequence[str], trainer_requires: Sequence[str],
                  say: Callable[[str], None]) -> dict[str, tuple[str, ...]] | None:
    """Pool kind -> `backend`'s requirements pinned on the job's image, or None (not resolved: said).

    Raises:
        UsageError: the backend's packages (with the trainer's requirements) cannot be installed beside the
            image's framework packages.
    """
    from mlsubmit.images import choose
    from mlsubmit.images.check import resolve

    image = choose.job_image(spec)
    if image is None:
        say(f"{backend}: the job's image is not in mlsubmit's table: its packages go unpinned")
        return None
    pins: dict[str, tuple[str, ...]] = {}
    for kind in kinds:
        needs = keras_backends.requirements(backend, kind)
        if not needs:
            continue
        requirements = [*trainer_requires, *needs]
        cache = _cache_file(image.key, requirements, image.python)
        if cache.exists():
            pins[kind] = tuple(json.loads(cache.read_text()))
            continue
        try:
            resolved, warnings = resolve(requirements, image)
        except UsageError as err:
            raise UsageError(f"--backends {backend}: {err.message}",
                             hint=f"run {backend} on an image whose packages it can share (--runtime-version, "
                                  f"--executor-image-uri), or drop {backend}") from None
        if resolved is None:
            for warning in warnings:
                say(f"warning: {backend}: {warning}")
            say(f"warning: {backend}: its packages go unpinned ({', '.join(needs)}): the cloud's pip takes the "
                f"newest, which may replace {image.name}'s numpy or protobuf")
            return None
        pins[kind] = pin(needs, resolved)
        cache.parent.mkdir(parents=True, exist_ok=True)
        partial = cache.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(list(pins[kind])))
        os.replace(partial, cache)
    for kind, pinned in pins.items():
        say(f"{backend}: pinned on {image.name} ({kind} pools) by pip's resolver with the image's packages: "
            f"{', '.join(pinned)}")
    return pins
