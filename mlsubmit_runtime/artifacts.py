"""A job directory's files, local or gs://, with MANIFEST.json written last — the format `mlsubmit predict` checks.

    from mlsubmit_runtime.artifacts import publish_dir
    publish_dir("/tmp/out", os.environ.get("AIP_MODEL_DIR") or "gs://bucket/run")   # every file, then the manifest

MANIFEST.json lists every file with its size and sha256 and is written (and uploaded) only after all of them, so a
directory without it is incomplete: remove it before writing anything (`Location.remove(MANIFEST)`).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

from mlsubmit_runtime.storage import Location

MANIFEST = "MANIFEST.json"
FORMAT = "mlsubmit-artifacts/1"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def write_json(path: Path, obj) -> None:
    """Write `obj` as JSON atomically (numpy scalars allowed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=_jsonable) + "\n")
    os.replace(tmp, path)


def _jsonable(value):
    if hasattr(value, "item") and callable(value.item):  # numpy scalars, without importing numpy
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def build_manifest(root: Path, files: list[Path]) -> dict:
    return {
        "format": FORMAT,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "files": [{"path": p.relative_to(root).as_posix(), "size": p.stat().st_size, "sha256": sha256_file(p)}
                  for p in files],
    }


def publish(job_dir: Location, files: list[Path]) -> dict:
    """Upload `files` (below `job_dir.local`) if the job dir is remote, then write and upload MANIFEST.json last."""
    for path in files:
        job_dir.push(path.relative_to(job_dir.local).as_posix())
    manifest = build_manifest(job_dir.local, files)
    write_json(job_dir.local / MANIFEST, manifest)
    job_dir.push(MANIFEST)
    return manifest


def publish_dir(local_dir: str | os.PathLike, job_dir: str) -> dict:
    """Every file below `local_dir` to `job_dir` (a local path or gs://bucket/prefix), MANIFEST.json last.

    Returns the manifest. Raises InputError for a gs:// path that is not gs://BUCKET[/PREFIX].
    """
    local = Path(local_dir)
    files = sorted(p for p in local.rglob("*") if p.is_file() and p.name != MANIFEST)
    target = Location(job_dir, local)  # a gs:// job dir publishes straight from local_dir: no mirror
    if not target.remote and target.local.resolve() != local.resolve():
        import shutil

        for path in files:
            dest = target.local / path.relative_to(local)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest)
        files = [target.local / path.relative_to(local) for path in files]
    return publish(target, files)
