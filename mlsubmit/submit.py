"""Submitting a training job: validate, package and stage once per content hash, build the request, create once.

    submission = prepare(spec, api="vertex", settings=settings, package_path="trainer")   # no network
    staged = stage(submission)                       # uploads only a package the bucket does not hold yet
    status = submit(submission, backend)             # exactly one job, whatever answers get lost

`prepare` is everything that can be decided offline and without credentials — the settings each job needs,
a job name when none was given, the job dir, the package's files and sha256 (so its content-addressed URI is
known before anything is built), the request body (a pure function of the spec, checked against the API's
discovery schema), the request id that makes the create idempotent, and the distribution strategy the trainer
will pick. `--dry-run` shows it and stops there; any mistake stops there too, so nothing is uploaded or
submitted after a validation error. The package is pre-flighted (installed offline into a fresh venv) only
when its sha256 is not staged yet: once per content hash, like the upload.
"""

from __future__ import annotations

import re
import secrets
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlsubmit import requests as request_builders
from mlsubmit.backends.base import REQUEST_LABEL, JobStatus
from mlsubmit.errors import OperationFailed, UsageError
from mlsubmit.settings import Settings
from mlsubmit.spec import JobSpec


@dataclass(frozen=True)
class Submission:
    """Everything decided before anything is sent."""

    spec: JobSpec  # complete: job name, job dir, package URIs
    api: str
    settings: Settings
    staging: str  # gs://BUCKET[/PREFIX]: packages go under <staging>/packages/<sha256>/
    parent: str
    body: dict[str, Any]  # the create request's body, request id label included
    request_id: str
    package: Any  # mlsubmit.packaging.DryRun: plan, sha256, size, uri
    strategy: tuple[str, str] | None  # (name, reason) the trainer will pick; None for another program
    notes: tuple[str, ...]

    @property
    def method(self) -> str:
        """The REST call, as `POST https://…/v1/<parent>/customJobs` (for --dry-run)."""
        if self.api == "legacy":
            root = self.settings.endpoint or "https://ml.googleapis.com"
            return f"POST {root}/v1/{self.parent}/jobs"
        root = self.settings.endpoint or f"https://{self.spec.region}-aiplatform.googleapis.com"
        return f"POST {root}/v1/{self.parent}/customJobs"


def generate_job_name(base: str) -> str:
    """`<base>_<UTC yyyymmdd_HHMMSS>_<6 hex>`: readable, unique, a valid legacy job id and Vertex AI name."""
    stem = re.sub(r"\W", "_", base.strip()) or "job"
    stem = stem if stem[0].isalpha() else f"job_{stem}"
    return f"{stem[:64]}_{time.strftime('%Y%m%d_%H%M%S', time.gmtime())}_{secrets.token_hex(3)}"


def planned_strategy(spec: JobSpec) -> tuple[str, str] | None:
    """(strategy, why) that mlsubmit's trainer will choose for this cluster, from `trainer.strategy.choose` (a
    pure function: no TensorFlow). None when the job runs another program."""
    if not spec.python_module.startswith("trainer."):
        return None
    from trainer.cluster import Cluster
    from trainer.errors import TrainerError
    from trainer.strategy import choose

    pools = spec.pools
    cluster = {role: tuple(f"{role}-{index}:2222" for index in range(pool.replica_count))
               for role, pool in pools.items() if role != "evaluator"}
    evaluators = pools["evaluator"].replica_count if "evaluator" in pools else 0
    accelerator = pools["chief"].accelerator
    devices = accelerator[1] if accelerator and accelerator[0].startswith("NVIDIA") else 1
    devices = _gpus_flag(spec.args, devices)
    try:
        choice = choose(Cluster(cluster, "chief", 0, evaluators), devices)
    except TrainerError as err:
        raise UsageError(f"invalid cluster for the trainer: {err}") from None
    return choice.name, choice.reason


def _gpus_flag(args: tuple[str, ...], default: int) -> int:
    """The trainer's `--gpus N` among the trainer arguments caps the devices it uses."""
    for index, arg in enumerate(args):
        value = arg.split("=", 1)[1] if arg.startswith("--gpus=") else \
            args[index + 1] if arg == "--gpus" and index + 1 < len(args) else None
        if value is not None and value.isdigit():
            return max(1, min(default, int(value)))
    return default


def prepare(spec: JobSpec, *, api: str, settings: Settings, package_path: str | Path = "trainer",
            setup_py: str | Path | None = None) -> Submission:
    """Decide the whole submission without network or credentials. Raises UsageError for anything wrong."""
    from mlsubmit import discovery, packaging
    from mlsubmit.backends import check_api

    check_api(api)
    settings.require("project")
    staging = settings.staging_bucket or spec.job_dir
    if not staging:
        settings.require("staging_bucket")
    job_name = spec.job_name or generate_job_name(Path(package_path).resolve().name)
    planned = packaging.dry_run(package_path, setup_py=setup_py, stage_to=staging)
    spec = spec.replace(job_name=job_name, job_dir=spec.job_dir or f"{staging}/jobs/{job_name}",
                        package_uris=tuple(dict.fromkeys((planned.uri, *spec.package_uris))))
    request_id = uuid.uuid4().hex
    if api == "legacy":
        body, notes = request_builders.legacy_job(spec), []
        parent, schema = f"projects/{settings.project}", ("ml.v1", "GoogleCloudMlV1__Job")
    else:
        body, notes = request_builders.vertex_custom_job(spec), request_builders.vertex_pools(spec)[1]
        parent = f"projects/{settings.project}/locations/{spec.region}"
        schema = ("aiplatform.v1", "GoogleCloudAiplatformV1CustomJob")
    body["labels"] = {**body.get("labels", {}), REQUEST_LABEL: request_id}
    violations = discovery.validate(*schema, body)
    if violations:
        raise UsageError(f"invalid request body: {violations[0].field}: {violations[0].description}")
    return Submission(spec, api, settings, staging, parent, body, request_id, planned, planned_strategy(spec),
                      tuple(notes))


def stage(submission: Submission, *, check: bool = True, retry: Any = None, show_progress: bool = False,
          say: Callable[[str], None] = lambda text: None) -> Any:
    """Build the sdist and put it at its content-addressed URI, unless that object is already there: then nothing
    is built, pre-flighted or sent (its name holds the sha256 of its bytes; its size is checked).
    Returns mlsubmit.packaging.StagedPackage."""
    from mlsubmit import packaging, storage

    planned = submission.package
    if check:  # the image's Python and packages, before anything is uploaded (once per sha256 and image)
        from mlsubmit.image_check import check_plan
        check_plan(submission.spec, planned, say=say)
    found = storage.stat(planned.uri, retry=retry)
    if found is not None:
        if found.size != planned.size:
            raise OperationFailed(f"{planned.uri} holds {found.size:,} bytes, not the {planned.size:,} of the package "
                                  "whose sha256 names it", hint="delete the stale object and submit again")
        return packaging.StagedPackage(planned.uri, planned.sha256, uploaded=False, bytes_sent=0)
    if check:
        say(f"checking {planned.plan.filename} installs offline in a fresh venv (once per content hash)")
    with tempfile.TemporaryDirectory(prefix="mlsubmit-sdist-") as dist:
        result = packaging.package_plan(planned.plan, dist_dir=dist, check=check, stage_to=submission.staging,
                                        retry=retry, show_progress=show_progress)
    staged = result.staged
    if staged.uri != planned.uri:
        raise OperationFailed(f"the package changed while it was being submitted (sha256 {staged.sha256[:12]}…, "
                              f"planned {planned.sha256[:12]}…)", hint="run the command again")
    return staged


def submit(submission: Submission, backend: Any) -> JobStatus:
    """Create the job once (retried safely: see the backends); returns its first status."""
    return backend.submit(submission.body, submission.request_id)
