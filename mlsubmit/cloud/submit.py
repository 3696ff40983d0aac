"""Submitting a training job: validate, package and stage once per content hash, build the request, create once.

    submission = prepare(spec, api="vertex", settings=settings, package_path="trainer")   # no network
    staged = stage(submission)                       # uploads only a package the bucket does not hold yet
    status = submit(submission, service)             # exactly one job, whatever answers get lost

`prepare` is everything that can be decided offline and without credentials — the settings each job needs,
a job name when none was given, the job dir, the package's files and sha256 (so its content-addressed URI is
known before anything is built), the request body (a pure function of the spec, checked against the API's
discovery schema), and the request id that makes the create idempotent. The request id is derived from the
submission (`request_id_of`): a re-run of the same command finds the job an earlier run made (`earlier`) instead
of creating a second one, even when that run never heard the create's answer. `--dry-run` shows it and stops there; any mistake stops there too, so nothing is uploaded or
submitted after a validation error. The package is pre-flighted (installed offline into a fresh venv) only
when its sha256 is not staged yet: once per content hash, like the upload.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlsubmit.jobspec import requests as request_builders
from mlsubmit.targets.base import REQUEST_LABEL, JobStatus
from mlsubmit.errors import OperationFailed, UsageError, invalid_value
from mlsubmit.jobspec.job_names import generate_job_name
from mlsubmit.packaging.runtime_dist import planned_runtime
from mlsubmit.cloud.settings import Settings
from mlsubmit.jobspec.spec import JobSpec


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
    notes: tuple[str, ...]
    runtime: Any = None  # the DryRun of mlsubmit-runtime, staged beside a package that uses it; else None
    extras: tuple[Any, ...] = ()  # mlsubmit.packaging.ExtraPackage: the job's other packages

    @property
    def method(self) -> str:
        """The REST call, as `POST https://…/v1/<parent>/customJobs` (for --dry-run)."""
        if self.api == "legacy":
            root = self.settings.endpoint or "https://ml.googleapis.com"
            return f"POST {root}/v1/{self.parent}/jobs"
        root = self.settings.endpoint or f"https://{self.spec.region}-aiplatform.googleapis.com"
        return f"POST {root}/v1/{self.parent}/customJobs"


REQUEST_KEY = re.compile(r"[A-Za-z0-9._-]{1,63}")


def check_request_key(key: str | None) -> str | None:
    """A --request-id value: 1-63 letters, digits, `.`, `_` or `-` (None: not given)."""
    if key is not None and not REQUEST_KEY.fullmatch(key):
        raise invalid_value("--request-id", key, "1 to 63 letters, digits, '.', '_' or '-'",
                            hint="any new value submits the same job again as a new job")
    return key


def request_id_of(body: dict[str, Any], *, api: str, parent: str, package_sha256: str,
                  generated_name: str | None = None, key: str | None = None) -> str:
    """The idempotency key of a submission (32 hex digits): a hash of where it goes, the package's sha256, the
    request body (a generated job name, which differs on every run, left out) and the user's --request-id.
    The same submission gets the same id on every run; any change, or another --request-id, gives a new one."""
    text = json.dumps(body, sort_keys=True, ensure_ascii=False)
    if generated_name:
        text = text.replace(generated_name, "<generated job name>")
    material = "\0".join((api, parent, package_sha256, key or "", text))
    return hashlib.sha256(material.encode("utf-8")).hexdigest()[:32]


def prepare(spec: JobSpec, *, api: str, settings: Settings, package_path: str | Path = "trainer",
            setup_py: str | Path | None = None, requirements: tuple[str, ...] = (),
            extras: tuple[Any, ...] = (), request_key: str | None = None,
            generated_name: str | None = None) -> Submission:
    """Decide the whole submission without network or credentials. Raises UsageError for anything wrong.
    `request_key` (--request-id) is mixed into the request id: a new one submits the same job again.
    `generated_name`: the name another submission of the same job generated (failover alternatives share it)."""
    from mlsubmit import packaging
    from mlsubmit.jobspec import discovery
    from mlsubmit.jobspec.limits import check_request
    from mlsubmit.targets import check_api

    check_api(api)
    settings.require("project")
    staging = settings.staging_bucket or spec.job_dir
    if not staging:
        settings.require("staging_bucket")
    check_request_key(request_key)
    planned = packaging.dry_run(package_path, setup_py=setup_py, stage_to=staging, requirements=requirements)
    packaging.planned_module(planned.plan, spec.python_module)  # a module the package lacks: stop here
    runtime = planned_runtime(planned.plan, staging)
    job_name = spec.job_name or generated_name or generate_job_name(planned.plan.metadata.name)
    generated = None if spec.job_name else job_name
    # Vertex AI: baseOutputDirectory (hence AIP_*) from --job-dir or the staging bucket, never an argument.
    # Legacy AI Platform: a jobDir (passed as --job-dir) only when the user gave one, as gcloud did.
    job_dir = spec.job_dir or (f"{staging}/jobs/{job_name}" if api != "legacy" else None)
    extra_uris = tuple(packaging.extra_uri(extra, staging) for extra in extras)
    # the job's other packages before the trainer's: a container command installs them in this order, and a
    # trainer that requires one of them (not on the package index) installs only after it
    uris = (*((runtime.uri,) if runtime else ()), *extra_uris, planned.uri, *spec.package_uris)
    # the modules of the image's listed packages (pandas, hypertune, ...) the packages import: a carrier's command
    # installs those packages first, as the image it replaces had them (mlsubmit.images.listed)
    from mlsubmit.images.listed import archive_sources, imports

    sources = [*((f.path, f.source) for f in planned.plan.files),
               *(source for extra in extras if extra.path is not None for source in archive_sources(extra.path))]
    spec = spec.replace(job_name=job_name, job_dir=job_dir, package_uris=tuple(dict.fromkeys(uris)),
                        package_imports=tuple(sorted(imports(sources))))
    if api == "legacy":
        body, notes = request_builders.legacy_job(spec), []
        parent, schema = f"projects/{settings.project}", ("ml.v1", "GoogleCloudMlV1__Job")
    else:
        body, notes = request_builders.vertex_custom_job(spec), request_builders.vertex_pools(spec)[1]
        parent = f"projects/{settings.project}/locations/{spec.region}"
        schema = ("aiplatform.v1", "GoogleCloudAiplatformV1CustomJob")
    request_id = request_id_of(body, api=api, parent=parent, package_sha256=planned.sha256, key=request_key,
                               generated_name=generated)
    body["labels"] = {**body.get("labels", {}), REQUEST_LABEL: request_id}
    check_request(body, f"the {'legacy Job' if api == 'legacy' else 'CustomJob'} request body")
    violations = discovery.validate(*schema, body)
    if violations:
        raise UsageError(f"invalid request body: {violations[0].field}: {violations[0].description}")
    return Submission(spec, api, settings, staging, parent, body, request_id, planned, tuple(notes), runtime,
                      tuple(extras))


def stage(submission: Submission, *, check: bool = True, retry: Any = None, show_progress: bool = False,
          say: Callable[[str], None] = lambda text: None, checked: Callable[[], None] = lambda: None) -> Any:
    """Build the sdist and put it at its content-addressed URI, unless that object is already there: then nothing
    is built, pre-flighted or sent (its name holds the sha256 of its bytes; its size is checked). mlsubmit-runtime,
    when the package uses it, is staged the same way first (never pre-flighted: it is mlsubmit's own).
    `checked()` is called once the image check passed, before anything is sent (a refusal stays one line).
    Returns the package's mlsubmit.packaging.StagedPackage."""
    from mlsubmit.images import choose

    # what the service would refuse (a retired or non-prebuilt image, a legacy pair ml.v1 never offered), before
    # anything is uploaded: --skip-preflight skips the install check only
    choose.served(submission.spec, say, api=submission.api)
    if check:  # the image's Python and packages, before anything is uploaded (once per sha256 and image)
        from mlsubmit.images.check import check_plan
        from mlsubmit.packaging.runtime_dist import DISTRIBUTION

        from mlsubmit.packaging.extras import staged_names

        check_plan(submission.spec, submission.package, say=say, api=submission.api,
                   staged=(DISTRIBUTION, *staged_names(submission.extras)))
    checked()
    if submission.runtime is not None:
        runtime = _stage_one(submission, submission.runtime, check=False, retry=retry, show_progress=show_progress,
                             say=say)
        sent = f"uploaded, {runtime.bytes_sent:,} bytes" if runtime.uploaded else "already staged, 0 bytes sent"
        say(f"runtime {runtime.uri} ({sent})")
    from mlsubmit import packaging

    for extra in submission.extras:  # content-addressed too: an unchanged one is not sent again
        packaging.stage_extra(extra, submission.staging, retry=retry, show_progress=show_progress)
    return _stage_one(submission, submission.package, check=check, retry=retry, show_progress=show_progress,
                      say=say)


def _stage_one(submission: Submission, planned: Any, *, check: bool, retry: Any, show_progress: bool,
               say: Callable[[str], None]) -> Any:
    from mlsubmit import packaging
    from mlsubmit.cloud import storage

    found = storage.stat(planned.uri, retry=retry)
    if found is not None:
        if found.size != planned.size:
            raise OperationFailed(f"{planned.uri} holds {found.size:,} bytes, not the {planned.size:,} of the package "
                                  "whose sha256 names it", hint="delete the stale object and submit again")
        module = submission.spec.python_module
        if check and not packaging.planned_module(planned.plan, module):  # from elsewhere: only a venv can tell
            say(f"checking {module} starts in a fresh venv with {planned.plan.filename} and its requirements")
            with tempfile.TemporaryDirectory(prefix="mlsubmit-sdist-") as dist:
                packaging.package_plan(planned.plan, dist_dir=dist, module=module, extras=submission.extras,
                                       base=_preflight_base(submission, say))
        return packaging.StagedPackage(planned.uri, planned.sha256, uploaded=False, bytes_sent=0)
    if check:
        say(f"checking {planned.plan.filename} installs in a fresh venv with its requirements and "
            f"{submission.spec.python_module} starts there (once per content hash)")
    with tempfile.TemporaryDirectory(prefix="mlsubmit-sdist-") as dist:
        result = packaging.package_plan(planned.plan, dist_dir=dist, check=check, stage_to=submission.staging,
                                        retry=retry, show_progress=show_progress, module=submission.spec.python_module,
                                        extras=submission.extras if check else (),
                                        base=_preflight_base(submission, say) if check else None)
    staged = result.staged
    if staged.uri != planned.uri:
        raise OperationFailed(f"the package changed while it was being submitted (sha256 {staged.sha256[:12]}…, "
                              f"planned {planned.sha256[:12]}…)", hint="run the command again")
    return staged


def _preflight_base(submission: Submission, say: Callable[[str], None]) -> Any:
    """The pre-flight runs on the job's image environment (its Python and packages) when image environments are on."""
    from mlsubmit.images import choose
    from mlsubmit.packaging.preflight import base_env, own_env

    image = choose.job_image(submission.spec, api=submission.api)
    return base_env(image, say) if image is not None else own_env()


def earlier(submission: Submission, service: Any) -> JobStatus | None:
    """The job an earlier run of this same submission made (within a day), if any: submitting is then done."""
    return service.earlier(submission.request_id)


def submit(submission: Submission, service: Any) -> JobStatus:
    """Create the job once (retried safely: see the backends); returns its first status."""
    return service.submit(submission.body, submission.request_id)
