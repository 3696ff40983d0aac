"""What a finished local job left in its job dir, said for any trainer: facts about the directory, never the
bundled trainer's conventions presented as facts about another program.

`describe(job_dir)` → one line: the files there and whether a MANIFEST.json (mlsubmit_runtime.artifacts' format,
what `mlsubmit predict` checks) lists them; `devices_used(job_dir)` → what the job dir's metrics.json says about
devices, when a trainer wrote one that says so.
"""

from __future__ import annotations

import json
from pathlib import Path

from mlsubmit_runtime.artifacts import MANIFEST


def _manifest_files(path: Path) -> int | None:
    try:
        return len(json.loads(path.read_text())["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def describe(job_dir: str | None, *, api: str = "vertex") -> str:
    """One line about `job_dir` after the job: what it holds, with or without a MANIFEST.json."""
    if not job_dir:
        return "job dir: none (legacy AI Platform passes --job-dir only when you give one)"
    what = "base output directory" if api == "vertex" else "job dir"
    if job_dir.startswith("gs://"):
        return f"{what}: {job_dir}/{_remote_manifest(job_dir)}"
    root = Path(job_dir)
    files = [p for p in root.rglob("*") if p.is_file()] if root.is_dir() else []
    if not files:
        return f"{what}: {job_dir}/ — nothing was written there"
    manifests = sorted(root.rglob(MANIFEST), key=lambda path: (len(path.parts), path))
    if not manifests:
        return f"{what}: {job_dir}/ — {len(files)} files, no MANIFEST.json (mlsubmit predict needs one: " \
               "mlsubmit_runtime.artifacts.publish_dir writes it)"
    manifest = manifests[0]  # the shallowest: the job dir's own, or AIP_MODEL_DIR's (model/)
    where = manifest.parent.relative_to(root).as_posix()
    named = "MANIFEST.json" if where == "." else f"{where}/MANIFEST.json"
    listed = _manifest_files(manifest)
    if listed is None:
        return f"{what}: {job_dir}/ — {len(files)} files; {named} is not a readable manifest"
    return f"{what}: {job_dir}/ — {len(files)} files; {named} lists {listed} of them (complete: mlsubmit " \
           f"predict {manifest.parent})"


def _remote_manifest(job_dir: str) -> str:
    from mlsubmit.cloud import storage
    from mlsubmit.errors import MlsubmitError

    try:
        found = storage.stat(f"{job_dir}/{MANIFEST}")
    except MlsubmitError as err:
        return f" (could not look for MANIFEST.json: {err.message})"
    if found is not None:
        return " — MANIFEST.json written (complete)"
    held = holds_objects(job_dir)
    return " — nothing was written there" if held is False else " — no MANIFEST.json there"


def holds_objects(job_dir: str) -> bool | None:
    """Whether any object lies below the gs:// `job_dir` (None: it could not be looked at). Never raises."""
    from mlsubmit.cloud import storage
    from mlsubmit.errors import MlsubmitError

    try:
        from mlsubmit.emulator.gcs_emulator import storage_client

        bucket, prefix = storage.split_gcs(job_dir.rstrip("/") + "/")
        return any(True for _ in storage_client().list_blobs(bucket, prefix=prefix, max_results=1, timeout=10))
    except Exception:  # best effort (MlsubmitError, the client's errors): a line of output, never a failure
        return None


def replicas_wrote(root: Path) -> int:
    """How many files the replicas of a local job wrote by relative paths in their own working directories under
    `root` (mlsubmit.local.workdir): regular files, not the links to the user's files."""
    if not root.is_dir():
        return 0
    return sum(1 for replica in root.iterdir() if replica.is_dir() and not replica.is_symlink()
               for path in _own_files(replica))


def _own_files(directory: Path):
    for entry in directory.iterdir():
        if entry.is_symlink():
            continue
        if entry.is_dir():
            yield from _own_files(entry)
        elif entry.is_file():
            yield entry


def devices_used(job_dir: str | None) -> str | None:
    """`device_kind` × devices from the job dir's metrics.json, where a trainer wrote it (the bundled one does)."""
    if not job_dir or job_dir.startswith("gs://"):
        return None
    try:
        metrics = json.loads((Path(job_dir) / "metrics.json").read_text())
        return f"{len(metrics['devices'])} × {metrics['device_kind']}"
    except (OSError, ValueError, KeyError, TypeError):
        return None
