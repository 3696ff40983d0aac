"""`mlsubmit train` without --local: submit the job spec to Vertex AI (or legacy AI Platform) and follow it.

The train command (commands/train.py) declares the spec options and calls `train_cloud`; this module adds the
cloud options (`with_cloud_options`) and renders the submission. The work is mlsubmit.cloud.submit and
mlsubmit.targets.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Callable, Optional

import typer

from mlsubmit.commands._cloud_options import ENDPOINT, PROJECT, STAGING, with_options
from mlsubmit.errors import UsageError

_PANEL = "Cloud jobs (without --local)"


def _flag(name: str, help: str) -> Any:
    return Annotated[bool, typer.Option(name, help=help, rich_help_panel=_PANEL)]


MODES = {"stream_logs": "--stream-logs", "wait": "--wait", "async_": "--async"}
CLOUD_OPTIONS = {
    "project": (PROJECT, None), "staging_bucket": (STAGING, None), "endpoint": (ENDPOINT, None),
    "stream_logs": (_flag("--stream-logs", "Stream the replicas' logs with a live status line until the job ends "
                                           "(the default)."), False),
    "wait": (_flag("--wait", "Show the job's status only, until it ends."), False),
    "async_": (_flag("--async", "Return once the job is accepted; print its id."), False),
    "dry_run": (_flag("--dry-run", "Print the request body, the package's files and size and the program each "
                                   "replica runs; no credentials, no network, nothing sent."),
                False),
    "request_id": (Annotated[Optional[str], typer.Option(
        "--request-id", metavar="KEY", show_default=False, rich_help_panel=_PANEL,
        help="Mixed into the submission's idempotency key. Running the same submission again finds the job the "
             "first run made (within a day) instead of creating a second one, even if that run never heard the "
             "answer; a new KEY submits it again as a new job.")], None),
    "skip_preflight": (_flag("--skip-preflight", "Do not install a new package into a fresh venv before staging "
                                                 "it."), False),
}


def with_cloud_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add CLOUD_OPTIONS to `command`, which receives them as the dict `cloud_flags`."""
    return with_options(command, CLOUD_OPTIONS, into="cloud_flags")


def reject_for_local(cloud_flags: dict[str, Any]) -> None:
    """Cloud options make no sense with --local: say so rather than ignore them."""
    given = [MODES.get(name) or "--" + name.replace("_", "-") for name, value in cloud_flags.items() if value]
    if given:
        raise UsageError(f"invalid options for --local: {', '.join(given)} apply to cloud jobs only",
                         hint="drop them, or drop --local to submit the job")


def _mode(cloud_flags: dict[str, Any]) -> str:
    chosen = [name for name in MODES if cloud_flags.get(name)]
    if len(chosen) > 1:
        raise UsageError(f"received {' and '.join(MODES[c] for c in chosen)}; expected at most one of "
                         f"{', '.join(MODES.values())}", hint="pick how to follow the job")
    return chosen[0] if chosen else "stream_logs"


def _say(text: str) -> None:
    typer.echo(text, err=True)


def _yaml_region(config: str | None) -> str | None:
    if not config:
        return None
    from mlsubmit.jobspec.spec_input import load_yaml

    return load_yaml(config)[0].region


def train_cloud(spec_flags: dict[str, Any], cloud_flags: dict[str, Any], *, api: str, package_path: str,
                package_flags: dict[str, Any] | None = None, hptune_config: str | None = None,
                backends: tuple[str, ...] = ()) -> None:
    """Validate, package and stage once, submit once, then follow the job as asked. Exit 0 only if it SUCCEEDED.
    With `backends` (--backends), one job per Keras backend (mlsubmit.commands._backends_train)."""
    from mlsubmit.cloud import submit as submitting
    from mlsubmit.commands._cloud_options import service_of, settings_of
    from mlsubmit.commands._jobs_view import finish, follow
    from mlsubmit.commands._spec_options import spec_from_options

    mode = _mode(cloud_flags)
    region = spec_flags.get("region") or _yaml_region(spec_flags.get("config"))
    settings = settings_of(cloud_flags, region=region, staging_bucket=cloud_flags.get("staging_bucket"),
                           need=("region",))
    spec, notes = spec_from_options({**spec_flags, "region": settings.region}, target="cloud")
    from mlsubmit.tuning.submit import tuning_service, tuning_of, with_tuning
    tuning, tuning_notes = tuning_of(spec_flags.get("config"), hptune_config)
    if tuning is not None:  # mapped: not a note
        notes = [n for n in notes if not n.startswith("trainingInput.hyperparameters:")]
        if backends:
            raise UsageError("invalid options: --backends with a tuning study (each backend would be a study of "
                             "its own)", hint="tune one backend at a time: --env KERAS_BACKEND=NAME")
    from mlsubmit.jobspec.requests import reject_spot_for_legacy, require_python_package
    require_python_package(spec)
    if api == "legacy":
        reject_spot_for_legacy(spec)
    from mlsubmit.commands._spec_options import budgeted
    spec, estimate = budgeted(spec, spec_flags, tuning, backends=len(backends) or 1)
    if backends:
        from mlsubmit.cloud.backend_jobs import check_env
        from mlsubmit.jobspec.keras_backends import refuse_for_legacy

        if api == "legacy":
            refuse_for_legacy(backends)
        check_env(spec)
    settings.require("project")  # after the spec: a machine that cannot carry the GPUs is the first thing to hear
    from mlsubmit.packaging import resolve_extras
    from mlsubmit.packaging.requirements_txt import split_requirements

    package_flags = package_flags or {}
    submission = submitting.prepare(spec, api=api, settings=settings, package_path=package_path,
                                    requirements=split_requirements(package_flags.get("requirements")),
                                    extras=resolve_extras(package_flags.get("extra_packages")),
                                    request_key=cloud_flags.get("request_id"))
    if tuning is not None:
        submission = with_tuning(submission, tuning)
    for note in [*notes, *tuning_notes, *submission.notes]:
        typer.secho(f"warning: {note}", fg="yellow", err=True)
    for item in submission.package.plan.excluded_secrets:  # credentials, and links that leave the package
        typer.secho(f"warning: {item.warning()}", fg="yellow", err=True)
    def say_estimate() -> None:  # before anything is sent, after the checks that refuse in one line
        for line in estimate:
            _say(line)

    if backends:
        from mlsubmit.commands._backends_train import submit_backends

        say_estimate()
        return submit_backends(submission, backends, cloud_flags, mode=mode, render_dry_run=_render_dry_run)
    if cloud_flags.get("dry_run"):
        from mlsubmit.images import choose

        choose.served(submission.spec, _say, api=api)  # an image the service would refuse: one line, as a submission
        say_estimate()
        _render_dry_run(submission)
        return
    service = service_of(api, settings)
    service = tuning_service(service) if tuning is not None else service
    staged = submitting.stage(submission, check=not cloud_flags.get("skip_preflight"), show_progress=True, say=_say,
                              checked=say_estimate)
    sent = f"uploaded, {staged.bytes_sent:,} bytes" if staged.uploaded else "already staged, 0 bytes sent"
    _say(f"package {staged.uri} ({sent})")
    status = create_once(submission, service)
    if mode == "async_":
        typer.echo(status.job_id)
        return
    final, finder = follow(service, status, settings=settings, logs=mode == "stream_logs", announced=True)
    if tuning is not None:
        from mlsubmit.commands._tuning_view import trial_table
        from mlsubmit.tuning.results import results_of

        trial_table(results_of(final.resource))
    finish(service, final, finder, settings=settings)


def create_once(submission: Any, service: Any, *, who: str = "") -> Any:
    """The job of this submission: the one an earlier run already made (found by its request id), else created now;
    said on stderr, each line prefixed with `who` (a Keras service's name) when given. Ctrl-C while creating says how
    to check and exits 130."""
    from mlsubmit.cloud import submit as submitting

    prefix = f"{who}: " if who else ""
    try:
        earlier = submitting.earlier(submission, service)
        status = earlier or submitting.submit(submission, service)
    except KeyboardInterrupt:
        _say(f"\ninterrupted while submitting{f' the {who} job' if who else ''}: the job may or may not exist; to "
             f"check: `{service.check_command(submission.request_id)}`; running the same command again is safe")
        raise typer.Exit(130) from None
    if earlier is not None:
        _say(f"{prefix}this same submission already made job {status.job_id} (created {status.create_time}); not "
             "submitting it again (add --request-id KEY with a new KEY to submit it as a new job)")
    named = f" ({status.display_name})" if status.display_name != status.job_id else ""
    _say(f"{prefix}job {status.job_id}{named} accepted: {status.state}")
    url = service.console_url(status)
    if url:
        _say(f"{prefix}console: {url}")
    return status


def _render_dry_run(submission: Any, jobs: tuple[Any, ...] = ()) -> None:
    """The request body (each job's, for --backends), the package's files, the program and the settings."""
    planned, spec = submission.package, submission.spec
    for job in jobs or (submission,):
        if jobs:
            from mlsubmit.jobspec.keras_backends import BACKENDS

            typer.echo(f"# --backends {job.keras_backend}: request id {job.request_id}; several devices of a "
                       f"replica: {BACKENDS[job.keras_backend].data_parallel}")
        typer.echo(job.method)
        typer.echo(json.dumps(job.body, indent=2))
    generated = {name: len(text.encode()) for name, text in planned.plan.generated_files().items()}
    files = sorted([(path, size, True) for path, size in generated.items()]
                   + [(f.path, f.size, False) for f in planned.plan.files])
    total = sum(size for _, size, _ in files)
    typer.echo(f"\npackage {planned.plan.filename}: {len(files)} files, {total:,} bytes ({planned.size:,} bytes "
               f"compressed), sha256 {planned.sha256}")
    typer.echo(f"  built by {planned.plan.build}")
    typer.echo(f"  stages to {planned.uri} (skipped if it is there already)")
    for path, size, made in files:
        typer.echo(f"  {size:>9,}  {path}{'  (generated)' if made else ''}")
    if submission.runtime is not None:
        runtime = submission.runtime
        typer.echo(f"runtime {runtime.plan.filename}: {runtime.size:,} bytes, sha256 {runtime.sha256} (the package "
                   f"uses mlsubmit_runtime)\n  stages to {runtime.uri} (skipped if it is there already)")
    for dry in {p.uri: p for job in jobs for p in job.backend_packages}.values():
        typer.echo(f"backend package {dry.plan.filename}: {dry.size:,} bytes, sha256 {dry.sha256}, requires "
                   f"{', '.join(dry.plan.metadata.requires)}\n  stages to {dry.uri} (skipped if it is there already)")
    typer.echo(f"\nprogram: python -m {spec.python_module}{''.join(' ' + a for a in spec.args)}")
    from mlsubmit.images import choose

    for role, choice in choose.pools(spec, api=submission.api).items():
        typer.echo(f"image ({role}): {choice.describe()}")
    settings = submission.settings
    where = [f"{name.replace('_', ' ')} {getattr(settings, name)} ({settings.sources[name]})"
             for name in ("project", "region", "staging_bucket", "endpoint") if getattr(settings, name)]
    typer.echo(f"settings: {'; '.join(where)}")
    if submission.api == "legacy":
        typer.echo(f"job dir: {spec.job_dir} (jobDir: the trainer gets --job-dir)" if spec.job_dir else
                   "job dir: none (legacy AI Platform passes --job-dir only when you give one)")
    elif jobs:
        typer.echo(f"base output directories: {', '.join(job.spec.job_dir for job in jobs)} (one per backend; "
                   "AIP_MODEL_DIR=<it>/model/, …; no argument is added)")
    else:
        typer.echo(f"base output directory: {spec.job_dir} (AIP_MODEL_DIR={spec.job_dir}/model/, …; no argument "
                   "is added)")
    typer.echo("nothing submitted (--dry-run): no credentials used, nothing sent")
