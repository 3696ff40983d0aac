"""`mlsubmit jobs list|describe|wait|logs|cancel`: follow cloud jobs on Vertex AI or legacy AI Platform (parse and
render; the work is mlsubmit.targets). A rich table for people, `--output json` for scripts.
"""

import re
from typing import Annotated, Any, Optional

import typer

from mlsubmit._typer_fast import plain_classes
from mlsubmit.commands._cloud_options import TARGET_OPTIONS, with_options
from mlsubmit.commands._output import OUTPUT, checked_output
from mlsubmit.errors import invalid_value

JOB = Annotated[str, typer.Argument(metavar="JOB", help="The job's id or resource name (Vertex AI: also its display "
                                                       "name).", show_default=False)]


_Group, _Command = plain_classes()


jobs_app = typer.Typer(cls=_Group, name="jobs", no_args_is_help=True, rich_markup_mode=None, add_completion=False,
                       help="List, describe, wait for, read the logs of and cancel cloud jobs (Vertex AI, or "
                            "--api legacy). Exit code of wait and logs --follow: 0 only if the job SUCCEEDED.")


def _command(name: str):
    def decorate(function):
        jobs_app.command(name, cls=_Command)(with_options(function, TARGET_OPTIONS, into="target"))
        return function
    return decorate


def register(app: typer.Typer) -> None:
    app.add_typer(jobs_app, name="jobs")


def _connect(target: dict[str, Any]) -> tuple[Any, Any]:
    """(service, settings) for the target options; the project (and for Vertex AI the region) must be set.
    `--api cluster`: the jobs this machine ran on Spark, Dask or Ray clusters (train --target), from their record."""
    if str(target["api"]).split(":")[0] == "kubernetes":  # the jobs of --target kubernetes[:CONTEXT]
        from mlsubmit.targets.kubernetes_jobs import KubeJobs

        return KubeJobs(target["api"]), None
    if target["api"] == "cluster":
        from mlsubmit.targets.cluster_record import ClusterJobs

        return ClusterJobs(), None
    from mlsubmit.targets import check_api
    from mlsubmit.commands._cloud_options import service_of, settings_of

    api = check_api(target["api"])
    settings = settings_of(target, need=("project",) if api == "legacy" else ("project", "region"))
    return service_of(api, settings), settings


def _lookup(service: Any, job: str) -> tuple[Any, Any]:
    """(service, status) of `job`: on Vertex AI a custom job, else a hyperparameter tuning job of that id or name."""
    from mlsubmit.errors import UsageError

    try:
        return service, service.get(job)
    except UsageError as err:
        if service.api != "vertex":
            raise
        from mlsubmit.tuning.submit import tuning_service

        tuning = tuning_service(service)
        try:
            return tuning, tuning.get(job)
        except UsageError:
            raise err from None


@_command("list")
def list_command(
    target: Any,
    state: Annotated[Optional[str], typer.Option("--state", metavar="STATE", show_default=False,
                                                 help="Only jobs in this state: QUEUED, PREPARING, RUNNING, "
                                                      "SUCCEEDED, FAILED, CANCELLING, CANCELLED, …")] = None,
    limit: Annotated[str, typer.Option("--limit", metavar="N", help="At most N jobs, newest first.")] = "20",
    request_id: Annotated[Optional[str], typer.Option(
        "--request-id", metavar="ID", show_default=False,
        help="Only the job a submission with this request id made (its label mlsubmit_request_id).")] = None,
    output: OUTPUT = "table",
    tuning: Annotated[bool, typer.Option("--tuning", help="Vertex AI: list hyperparameter tuning jobs instead of "
                                         "custom jobs (legacy tuning jobs are listed with the others).")] = False,
) -> None:
    """List jobs, newest first."""
    from mlsubmit.targets.base import REQUEST_LABEL, check_state
    from mlsubmit.commands._jobs_view import job_table, print_json, status_json

    checked_output(output)
    if not limit.isascii() or not limit.isdigit() or not 1 <= int(limit) <= 10000:  # not "٣", "²"
        raise invalid_value("--limit", limit, "a whole number from 1 to 10000")
    wanted = check_state(state) if state else None
    if request_id is not None and not re.fullmatch(r"[0-9a-f]{32}", request_id):
        raise invalid_value("--request-id", request_id, "the 32 hex digits of a job's mlsubmit_request_id label")
    service, _ = _connect(target)
    if tuning:
        from mlsubmit.tuning.submit import tuning_service

        service = tuning_service(service)
    statuses = service.list(wanted, int(limit),
                            filter=f'labels.{REQUEST_LABEL}="{request_id}"' if request_id else None)
    if output == "json":
        print_json([status_json(status) for status in statuses])
    else:
        job_table(statuses)


@_command("describe")
def describe_command(
    target: Any, job: JOB, output: OUTPUT = "table",
    plot: Annotated[Optional[str], typer.Option("--plot", metavar="FILE.png", show_default=False,
                                                help="A tuning job: also write a PNG of the metric of each trial "
                                                     "against each parameter (the best marked).")] = None,
) -> None:
    """Show a job: its cluster and program, state, times, consumed resources, error, and where its artifacts are;
    a tuning job's trials too (state, parameters, final metric, the best marked)."""
    from mlsubmit.commands._jobs_view import describe, print_json, status_json
    from mlsubmit.tuning.results import results_of

    checked_output(output)
    if plot is not None and not plot.lower().endswith(".png"):
        raise invalid_value("--plot", plot, "a file name ending in .png", hint=f"use {plot}.png")
    if plot is not None:
        from mlsubmit.extras import require

        require("tuning", purpose="--plot", modules=("matplotlib",))
    service, _ = _connect(target)
    service, status = _lookup(service, job)
    results = results_of(status.resource)
    if plot is not None and (results is None or results.best is None):
        raise invalid_value("--plot", plot, "a tuning job with at least one trial that reported its metric",
                            hint=f"job {status.job_id} " + ("is not a tuning job" if results is None else
                                                             "has no measured trial yet"))
    if output == "json":
        extra = {"tuning": results.to_dict()} if results is not None else {}
        print_json(status_json(status, console_url=service.console_url(status), **extra))
    else:
        describe(status, service.console_url(status))
        if results is not None:
            from mlsubmit.commands._tuning_view import trial_table

            trial_table(results)
    if plot is not None:
        from mlsubmit.commands._tuning_view import write_plot

        write_plot(results, plot, title=f"{status.display_name or status.job_id}")


@_command("wait")
def wait_command(
    target: Any, job: JOB,
    timeout: Annotated[Optional[str], typer.Option("--timeout", metavar="DURATION", show_default=False,
                                                   help="Stop waiting after this long (90s, 30m, 2h); the job keeps "
                                                        "running. Default: until it ends.")] = None,
    output: OUTPUT = "table",
) -> None:
    """Wait until a job ends, with a live status line; Ctrl-C detaches. Exit 0 only if it SUCCEEDED."""
    from mlsubmit.commands._jobs_view import finish, follow, print_json, status_json
    from mlsubmit.jobspec.spec_input import parse_duration
    from mlsubmit.tuning.results import results_of

    checked_output(output)
    seconds = parse_duration(timeout, "--timeout") if timeout is not None else None
    service, settings = _connect(target)
    service, status = _lookup(service, job)
    final, finder = follow(service, status, settings=settings, logs=False, timeout=seconds)
    results = results_of(final.resource)
    if output == "json":
        print_json(status_json(final, **({"tuning": results.to_dict()} if results is not None else {})))
    elif results is not None:
        from mlsubmit.commands._tuning_view import trial_table

        trial_table(results)
    finish(service, final, finder, settings=settings)


@_command("logs")
def logs_command(
    target: Any, job: JOB,
    follow_logs: Annotated[bool, typer.Option("--follow", "-f", help="Keep streaming until the job ends (exit 0 "
                                                                     "only if it SUCCEEDED); Ctrl-C detaches.")
                           ] = False,
    task: Annotated[Optional[str], typer.Option("--task", metavar="TASK", show_default=False,
                                                help="Only this replica: chief-0, worker-1, ps-0, evaluator-0 (or the "
                                                     "API's name: workerpool0-0, master-replica-0).")] = None,
    output: OUTPUT = "table",
) -> None:
    """Print a job's logs from Cloud Logging, each line prefixed with its task; --follow streams them."""
    from mlsubmit.commands._jobs_view import LogPrinter, finish, follow

    checked_output(output)
    service, settings = _connect(target)
    service, status = _lookup(service, job)
    if follow_logs:
        final, finder = follow(service, status, settings=settings, logs=True, task=task, output=output)
        finish(service, final, finder, settings=settings)
    else:
        LogPrinter(output)(service.logs(status, task=task))


@_command("cancel")
def cancel_command(target: Any, job: JOB, output: OUTPUT = "table") -> None:
    """Cancel a job that has not ended; it goes CANCELLING, then CANCELLED."""
    from mlsubmit.commands._jobs_view import print_json, status_json

    checked_output(output)
    service, _ = _connect(target)
    service, status = _lookup(service, job)
    status = service.cancel(status.name)
    if output == "json":
        print_json(status_json(status))
    else:
        typer.echo(f"job {status.job_id}: cancel requested; now {status.state}")
