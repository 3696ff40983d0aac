"""One cloud job per Keras backend (`train --backends tensorflow,jax,torch`), from one prepared Submission.

    submission = submit.prepare(spec, api="vertex", settings=settings)     # the trainer's package, once
    jobs = [for_backend(submission, name) for name in ("tensorflow", "jax", "torch")]

Each backend's job is the submission's body with, in every Python package pool: `KERAS_BACKEND=<name>` in its
`env`, the backend's requirements-only sdist (mlsubmit.packaging.backend_dist, by the pool's accelerator kind)
listed before the trainer's package, the job name suffixed `_<name>`, and the output directory `<job dir>/<name>`.
The trainer's arguments are untouched. Its request id is derived from the submission's and the backend's name, so
running the same command again finds every job the first run made instead of creating them twice.

Legacy AI Platform sets no environment variables for a package job: only `tensorflow` (the runtime's own
backend) is accepted there (mlsubmit.jobspec.keras_backends.refuse_for_legacy).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from typing import Any

from mlsubmit.targets.base import REQUEST_LABEL
from mlsubmit.cloud.submit import Submission
from mlsubmit.errors import UsageError
from mlsubmit.images import carried
from mlsubmit.jobspec import keras_backends, machines

LABEL = "mlsubmit_keras_backend"


@dataclasses.dataclass(frozen=True)
class BackendSubmission(Submission):
    keras_backend: str = ""
    backend_packages: tuple[Any, ...] = ()  # DryRuns of mlsubmit-keras-<backend> to stage (one per pool kind)


def pool_kind(pool: dict[str, Any]) -> str:
    """"cpu", "gpu" or "tpu": the accelerators of a Vertex AI worker pool spec."""
    accelerator = pool.get("machineSpec", {}).get("acceleratorType")
    if not accelerator:
        return "cpu"
    known = machines.ACCELERATORS.get(accelerator)
    return known.kind if known else ("tpu" if accelerator.startswith("TPU") else "gpu")


def backend_body(body: dict[str, Any], *, api: str, backend: str, trainer_uri: str,
                 package_uris: dict[str, str]) -> dict[str, Any]:
    """The create body of `backend`'s job (pure; the request-id label is the caller's).

    Args:
        body: the submission's body (Vertex AI CustomJob or legacy Job).
        trainer_uri: the trainer package's URI: the backend's package goes just before it.
        package_uris: pool kind -> URI of the backend's requirements sdist (missing: nothing to add).
    """
    document = copy.deepcopy(body)
    document["labels"] = {**document.get("labels", {}), LABEL: backend}
    if api == "legacy":
        keras_backends.refuse_for_legacy((backend,))
        document["jobId"] = f"{document['jobId']}_{backend}"
        training = document["trainingInput"]
        if training.get("jobDir"):
            training["jobDir"] = f"{training['jobDir'].rstrip('/')}/{backend}"
        return document
    document["displayName"] = f"{document['displayName']}_{backend}"[:128]
    job_spec = document["jobSpec"]
    if job_spec.get("baseOutputDirectory"):
        prefix = job_spec["baseOutputDirectory"]["outputUriPrefix"].rstrip("/")
        job_spec["baseOutputDirectory"] = {"outputUriPrefix": f"{prefix}/{backend}"}
    for pool in job_spec["workerPoolSpecs"]:
        package = carried.program(pool)  # a pythonPackageSpec, or a package run on a public image
        if package is None:
            continue
        env = [item for item in package.get("env", []) if item["name"] != keras_backends.VARIABLE]
        package["env"] = [*env, {"name": keras_backends.VARIABLE, "value": backend}]
        added = package_uris.get(pool_kind(pool))
        if added:
            uris = [uri for uri in package.get("packageUris", []) if uri != added]
            at = uris.index(trainer_uri) if trainer_uri in uris else 0
            package["packageUris"] = [*uris[:at], added, *uris[at:]]
        carried.set_program(pool, package)
    return document


def backend_request_id(request_id: str, backend: str) -> str:
    """The idempotency key of `backend`'s job in the submission whose key is `request_id` (32 hex digits)."""
    return hashlib.sha256(f"{request_id}\0keras backend\0{backend}".encode()).hexdigest()[:32]


def check_env(spec: Any) -> None:
    """--backends sets KERAS_BACKEND itself: the same variable in --env (or the YAML) would be overridden."""
    if keras_backends.VARIABLE in spec.env_dict:
        raise UsageError(f"invalid option with --backends: --env {keras_backends.VARIABLE}="
                         f"{spec.env_dict[keras_backends.VARIABLE]}; each backend's job gets its own",
                         hint=f"drop --env {keras_backends.VARIABLE}=…")


def package_kinds(body: dict[str, Any]) -> list[str]:
    """The pool kinds ("cpu", "gpu", "tpu") of a Vertex AI body's Python package pools, sorted."""
    return sorted({pool_kind(p) for p in body.get("jobSpec", {}).get("workerPoolSpecs", [])
                   if carried.program(p)})


def for_backend(submission: Submission, backend: str,
                pins: dict[str, tuple[str, ...]] | None = None) -> BackendSubmission:
    """`backend`'s job of `submission` (no network): its body checked against the discovery schema. `pins`: pool
    kind -> the backend's requirements pinned on the job's image (mlsubmit.jobspec.backend_pins), else the table's.

    Raises:
        UsageError: a backend legacy AI Platform cannot run, or a body the schema refuses.
    """
    from mlsubmit.jobspec import discovery
    from mlsubmit.packaging.backend_dist import planned_backend

    if submission.api == "legacy":
        keras_backends.refuse_for_legacy((backend,))
    check_env(submission.spec)
    planned = {kind: planned_backend(backend, kind, submission.staging, (pins or {}).get(kind))
               for kind in package_kinds(submission.body)}
    planned = {kind: dry for kind, dry in planned.items() if dry is not None}
    body = backend_body(submission.body, api=submission.api, backend=backend, trainer_uri=submission.package.uri,
                        package_uris={kind: dry.uri for kind, dry in planned.items()})
    request_id = backend_request_id(submission.request_id, backend)
    body["labels"][REQUEST_LABEL] = request_id
    schema = ("ml.v1", "GoogleCloudMlV1__Job") if submission.api == "legacy" else \
        ("aiplatform.v1", "GoogleCloudAiplatformV1CustomJob")
    violations = discovery.validate(*schema, body)
    if violations:
        raise UsageError(f"invalid request body for --backends {backend}: {violations[0].field}: "
                         f"{violations[0].description}")
    spec = submission.spec
    job_dir = f"{spec.job_dir.rstrip('/')}/{backend}" if spec.job_dir else None
    env = spec.env if submission.api == "legacy" else (*spec.env, (keras_backends.VARIABLE, backend))
    spec = spec.replace(job_name=body.get("jobId") or body["displayName"], job_dir=job_dir, env=env)
    fields = {f.name: getattr(submission, f.name) for f in dataclasses.fields(Submission)}
    unique = tuple({dry.uri: dry for dry in planned.values()}.values())
    return BackendSubmission(**{**fields, "spec": spec, "body": body, "request_id": request_id},
                             keras_backend=backend, backend_packages=unique)


def stage_backend_packages(jobs: list[BackendSubmission], *, retry: Any = None) -> list[Any]:
    """Stage every backend package the jobs list (each URI once; one already there is not sent again)."""
    from mlsubmit.packaging.backend_dist import stage_backend

    seen: dict[str, Any] = {}
    for job in jobs:
        for planned in job.backend_packages:
            if planned.uri not in seen:
                seen[planned.uri] = stage_backend(planned, retry=retry)
    return list(seen.values())
