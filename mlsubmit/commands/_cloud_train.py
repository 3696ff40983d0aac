"""`mlsubmit train` without --local: submit the job spec to Vertex AI (or legacy AI Platform) and follow it.

The train command (commands/train.py) declares the spec options and calls `train_cloud`; this module adds the
cloud options (`with_cloud_options`) and renders the submission. The work is mlsubmit.cloud.submit and
mlsubmit.targets.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Callable, List, Optional

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
    "alternative": (Annotated[List[str], typer.Option(
        "--alternative", metavar="region=R,machine-type=M,gpu-type=T,gpus=N", rich_help_panel=_PANEL,
        show_default=False,
        help="Fail over: when the service refuses the job for quota, or it fails for lack of capacity before it "
             "ran, submit it again with these changes (repeatable, tried in order; one job live at a time). The "
             "chief's machine, and every pool on it, changes.")], []),
    "cheapest_first": (_flag("--cheapest-first", "Try the job and its --alternative choices cheapest first (the "
                                                 "price table's rates)."), False),
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
    settings = settings_of(cloud_flags, region=region, staging_bucket=cloud_flags.get("staging_bucket"), need=())
    spec, notes = spec_from_options({**spec_flags, "region": settings.region}, target="cloud")
    # every setting the submission needs, named in one line (a job dir on gs:// stands in for the staging bucket)
    settings.require("project", "region", *(() if spec.job_dir else ("staging_bucket",)))
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
    choices = _choices(spec, cloud_flags, tuning=tuning is not None, backends=bool(backends), api=api)
    budgeted_choices = [budgeted(choice, spec_flags, tuning, backends=len(backends) or 1) for choice in choices]
    spec, estimate = budgeted_choices[0]
    estimate = estimate + _failover_lines([s for s, _ in budgeted_choices])
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
    submissions: list[Any] = []
    for choice, _ in budgeted_choices:  # the alternatives share the job's name (generated once)
        generated = submissions[0].spec.job_name if submissions and not spec.job_name else None
        submissions.append(submitting.prepare(choice, api=api, settings=_in_region(settings, choice.region),
                                              package_path=package_path,
                                              requirements=split_requirements(package_flags.get("requirements")),
                                              extras=resolve_extras(package_flags.get("extra_packages")),
                                              request_key=cloud_flags.get("request_id"), generated_name=generated))
    submission = submissions[0]
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

        for each in [submission, *submissions[1:]]:  # an image the service would refuse: one line, as a submission
            choose.served(each.spec, _say, api=api)
        say_estimate()
        _render_dry_run(submission)
        for index, other in enumerate(submissions[1:], 1):
            typer.echo(f"\n# alternative {index} (request id {other.request_id}): submitted only if the one before "
                       "gets no capacity")
            typer.echo(other.method)
            typer.echo(json.dumps(other.body, indent=2))
        return
    if len(submissions) > 1:
        from mlsubmit.images import choose

        for other in submissions[1:]:  # what the service would refuse, before anything is uploaded
            choose.served(other.spec, lambda text: None, api=api)
    service = service_of(api, settings)
    service = tuning_service(service) if tuning is not None else service

    def checked() -> None:  # the checks passed: say the estimate, and learn that the service answers before uploading
        say_estimate()
        submitting.earlier(submission, service)

    staged = submitting.stage(submission, check=not cloud_flags.get("skip_preflight"), show_progress=True, say=_say,
                              checked=checked)
    sent = f"uploaded, {staged.bytes_sent:,} bytes" if staged.uploaded else "already staged, 0 bytes sent"
    _say(f"package {staged.uri} ({sent})")
    if len(submissions) > 1:
        return _with_failover(submissions, api=api, settings=settings, mode=mode)
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


def _choices(spec: Any, cloud_flags: dict[str, Any], *, tuning: bool, backends: bool,
             api: str = "vertex") -> list[Any]:
    """The job and its --alternative choices in the order they are tried (mlsubmit.cloud.failover)."""
    from mlsubmit.cloud import failover

    alternatives = cloud_flags.get("alternative") or []
    if cloud_flags.get("cheapest_first") and not alternatives:
        raise UsageError("invalid option: --cheapest-first orders the job's --alternative choices; received none",
                         hint="add --alternative region=…, or drop --cheapest-first")
    if alternatives and (tuning or backends):
        given = "a tuning study" if tuning else "--backends"
        raise UsageError(f"invalid options: --alternative with {given} (failover submits one job at a time)",
                         hint="drop --alternative, or submit without " + ("the study" if tuning else "--backends"))
    return failover.plan(spec, alternatives, cheapest_first=bool(cloud_flags.get("cheapest_first")), api=api)


def _failover_lines(choices: list[Any]) -> list[str]:
    """The alternatives' lines of the estimate, each priced, in the order they are tried."""
    if len(choices) < 2:
        return []
    from mlsubmit.cloud import failover

    lines = [f"failover: {len(choices) - 1} alternative(s) if the job gets no capacity, tried in this order:"]
    lines += [f"  {'the job' if i == 0 else f'alternative {i}'}: {failover.describe(c)}" for i, c in enumerate(choices)]
    return lines


def _in_region(settings: Any, region: str) -> Any:
    import dataclasses

    return settings if settings.region == region else dataclasses.replace(settings, region=region)


def _with_failover(submissions: list[Any], *, api: str, settings: Any, mode: str) -> None:
    """Submit the choices in turn, one job live at a time: the next only when the service refused the one before
    for quota (nothing was made) or its job FAILED for lack of capacity before it ran. Any other outcome ends it."""
    from mlsubmit.cloud import failover
    from mlsubmit.commands._cloud_options import service_of
    from mlsubmit.commands._jobs_view import finish, follow
    from mlsubmit.targets.calls import QuotaExceeded

    last = len(submissions) - 1
    for index, submission in enumerate(submissions):
        where = _in_region(settings, submission.spec.region)
        service = service_of(api, where)
        following = failover.describe(submissions[index + 1].spec) if index < last else ""
        try:
            status = create_once(submission, service)
        except QuotaExceeded as err:
            if index == last:
                raise QuotaExceeded(f"{err.message}; the job and all {last} alternatives were refused or found no "
                                    "capacity", hint=err.hint) from None
            _say(f"failover: {failover.describe(submission.spec)} refused for quota "
                 f"({_reason(getattr(err, 'detail', err.message))}); "
                 f"submitting alternative {index + 1}: {following}")
            continue
        if mode == "async_":
            typer.echo(status.job_id)
            return
        final, finder = follow(service, status, settings=where, logs=mode == "stream_logs", announced=True)
        if failover.is_stockout(final) and index < last:
            _say(f"failover: job {final.job_id} ({failover.describe(submission.spec)}) FAILED before it ran, for lack "
                 f"of capacity ({_reason(final.error or '')}); submitting alternative {index + 1}: {following}")
            continue
        finish(service, final, finder, settings=where)
        return


def _reason(message: str) -> str:
    first = (message.strip().splitlines() or [""])[0]
    return first if len(first) <= 160 else first[:157] + "..."


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
