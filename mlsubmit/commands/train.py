"""`mlsubmit train`: run the job spec — `--local` runs it on this machine, one process per replica.

Parses and renders only: the work is mlsubmit.local.local_run; without --local, mlsubmit.commands._cloud_train
submits the job to Vertex AI / AI Platform and follows it.
"""

import os
import sys
from typing import Annotated, Any, List, Optional

import typer

from mlsubmit.commands._cloud_options import with_options
from mlsubmit.commands._cloud_train import reject_for_local, with_cloud_options
from mlsubmit.commands._package_options import PACKAGE_OPTIONS
from mlsubmit.commands._spec_options import CLOUD_REGION_HELP, SpecCommand, with_spec_options
from mlsubmit.errors import OperationFailed, UsageError, invalid_value

APIS = ("vertex", "legacy")


def register(app: typer.Typer) -> None:
    command = with_options(with_cloud_options(train), PACKAGE_OPTIONS, into="package_flags")
    app.command("train", cls=SpecCommand, no_args_is_help=False)(with_spec_options(command,
                                                                                   region_help=CLOUD_REGION_HELP))


def train(
    spec_flags: Any,
    cloud_flags: Any,
    package_flags: Any,
    local: Annotated[bool, typer.Option("--local", help="Run the job on this machine as the cloud would: the "
                                        "trainer's sdist installed into an isolated venv, one process per replica "
                                        "with its own TF_CONFIG, CLUSTER_SPEC and AIP_* variables on 127.0.0.1.")
                     ] = False,
    api: Annotated[str, typer.Option("--api", metavar="|".join(APIS), help="Where to submit: vertex (Vertex AI "
                                     "custom jobs) or legacy (AI Platform Training). With --local, whose "
                                     "environment to reproduce: vertex (chief, CLUSTER_SPEC, AIP_*) or legacy "
                                     "(master, TF_CONFIG only).")] = "vertex",
    package_path: Annotated[str, typer.Option("--package-path", metavar="DIR",
                                              help="The trainer package to build and install.")] = "trainer",
    start_port: Annotated[Optional[str], typer.Option(
        "--start-port", metavar="PORT", show_default=False,
        help="Give the replicas consecutive ports from PORT (default: free ports).")] = None,
    backends: Annotated[List[str], typer.Option(
        "--backends", "--backend", metavar="NAME,…", show_default=False,
        help="Keras 3 backends (tensorflow, jax, torch; comma-separated, repeatable): one job per backend, each with "
             "KERAS_BACKEND set, named <job>_<backend>, into <job dir>/<backend>. Cloud: all submitted at once "
             "(Vertex AI; the backend's packages added to the job). --local: run side by side here as the cores "
             "allow, then a table of accuracy, loss, samples/s and wall time.")] = [],
    target: Annotated[Optional[str], typer.Option(
        "--target", metavar="spark://|dask://|ray://HOST:PORT|kubernetes[:CONTEXT]", show_default=False,
        help="Run on your own cluster: one long-running task per replica (a Spark barrier stage, pinned Dask tasks, "
             "Ray actors in a placement group), each with the TF_CONFIG, CLUSTER_SPEC and AIP_* of --api; followed "
             "here, recorded for `mlsubmit jobs … --api cluster`. Needs mlsubmit[spark|dask|ray].")] = None,
    hptune_config: Annotated[Optional[str], typer.Option(
        "--hptune-config", metavar="FILE", show_default=False,
        help="Tune: a tuning spec (legacy trainingInput.hyperparameters or a Vertex AI studySpec) whose trials each "
             "run the job with --name=value per parameter; a tuning spec inside --config does the same. Creates a "
             "Vertex AI hyperparameter tuning job (or a legacy job with hyperparameters); with --local the trials "
             "run here.")] = None,
    namespace: Annotated[str, typer.Option("--namespace", help="--target kubernetes: the namespace.")] = "default",
    k8s_api: Annotated[str, typer.Option("--k8s-api", metavar="job|jobset|tfjob", help="--target kubernetes: "
                                         "Indexed Jobs and a headless Service, one JobSet (needs the JobSet "
                                         "controller) or one TFJob (needs the Training Operator).")] = "job",
    max_restarts: Annotated[int, typer.Option("--max-restarts", help="--target kubernetes --k8s-api "
                            "jobset: failurePolicy.maxRestarts, how often the JobSet recreates its Jobs after a "
                            "failure.")] = 0,
) -> None:
    """Train: submit the job spec to Vertex AI (or --api legacy) and stream its logs until it ends; or, with
    --local, run it here — the first replica that fails ends the job, Ctrl-C stops every replica, and a summary
    says where the artifacts are. Trainer arguments go after --."""
    if api not in APIS:
        raise invalid_value("--api", api, " or ".join(APIS))
    port = _port(start_port)
    chosen = ()
    if backends:
        from mlsubmit.jobspec.keras_backends import parse_backends

        chosen = parse_backends(backends)
    if target is not None and target.split(":")[0] == "kubernetes":  # --target kubernetes[:CONTEXT]
        from mlsubmit.commands._kube_train import train_kube

        reject_for_local(cloud_flags)
        return train_kube(spec_flags, target, package_path=package_path, package_flags=package_flags,
                          namespace=namespace, k8s_api=k8s_api, max_restarts=max_restarts)
    if target is not None:
        from mlsubmit.commands._cluster_train import train_cluster

        given = [flag for flag, on in (("--local", local), ("--backends", chosen), ("--start-port", port is not None))
                 if on]
        if given:
            raise UsageError(f"invalid option with --target: {given[0]} (a cluster job runs on the cluster's own "
                             "ports, one job per command)", hint=f"drop {given[0]}")
        reject_for_local(cloud_flags)
        return train_cluster(spec_flags, target, api=api, package_path=package_path, package_flags=package_flags,
                             hptune_config=hptune_config)
    if not local:
        from mlsubmit.commands._cloud_train import train_cloud

        return train_cloud(spec_flags, cloud_flags, api=api, package_path=package_path, package_flags=package_flags,
                           hptune_config=hptune_config, backends=chosen)
    reject_for_local(cloud_flags)
    if chosen:
        from mlsubmit.commands._backends_train import train_local_backends

        if hptune_config or port is not None:
            given = "--hptune-config" if hptune_config else f"--start-port {port}"
            raise UsageError(f"invalid option with --backends: {given} (the backends' jobs run side by side, each "
                             "on free ports)", hint=f"drop {given.split()[0]}")
        return train_local_backends(spec_flags, chosen, api=api, package_path=package_path,
                                    package_flags=package_flags)
    from mlsubmit.tuning.submit import tuning_of

    tuning, tuning_notes = tuning_of(spec_flags.get("config"), hptune_config)
    if tuning is not None:
        from mlsubmit.commands._local_tuning import train_local_tuning

        if port is not None:
            raise UsageError(f"invalid option for a tuning study: --start-port {port} (trials run at once, each on "
                             "free ports)", hint="drop --start-port")

        return train_local_tuning(spec_flags, tuning, tuning_notes, api=api, package_path=package_path,
                                  package_flags=package_flags)
    _train_local(spec_flags, api=api, package_path=package_path, start_port=port, package_flags=package_flags)


def _port(text: Optional[str]) -> Optional[int]:
    if text is None:
        return None
    if not text.isascii() or not text.isdigit() or not 1024 <= int(text) <= 65535:  # not "٣", "²"
        raise invalid_value("--start-port", text, "a port number from 1024 to 65535")
    return int(text)


def _train_local(spec_flags: Any, *, api: str, package_path: str, start_port: Optional[int],
                 package_flags: dict[str, Any]) -> None:
    from mlsubmit.commands._spec_options import local_spec
    from mlsubmit.local.local_run import run_local
    from mlsubmit.packaging import resolve_extras
    from mlsubmit.packaging.requirements_txt import split_requirements

    spec = local_spec(spec_flags)
    color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    run = run_local(spec, api=api, package_path=package_path, start_port=start_port, color=color,
                    say=lambda line: typer.echo(line), requirements=split_requirements(package_flags["requirements"]),
                    extras=resolve_extras(package_flags["extra_packages"]))
    outcome, job = run.outcome, run.job
    rejected = outcome.failed is not None and outcome.exit_codes.get(outcome.failed) == 2  # the trainer's bad input
    codes = ", ".join(f"{name} {'stopped' if code is None else code}" for name, code in outcome.exit_codes.items())
    colour = {"SUCCEEDED": "green", "FAILED": "red"}.get(outcome.state, "yellow")
    typer.secho(f"job {job.job_id} {outcome.state} in {outcome.seconds:.1f} s — exit codes: {codes}", fg=colour,
                bold=True)
    from mlsubmit.local.job_dir_report import describe, devices_used, replicas_wrote

    where = describe(job.job_dir, api=api)
    if job.emulated_devices:
        used = devices_used(job.job_dir)
        typer.echo(f"devices: MLSUBMIT_EMULATE_DEVICES={job.emulated_devices} was offered; " + (
            f"the trainer's metrics.json says it trained on {used}" if used else
            "the job dir does not say what the trainer used"))
    wrote = replicas_wrote(run.logs[next(iter(run.logs))].parent) if run.logs else 0
    if wrote:  # relative writes stay in each replica's own directory (mlsubmit.local.workdir)
        where += (f"; the replicas wrote {wrote} file(s) by relative paths into their own directories under "
                  f"{run.logs[next(iter(run.logs))].parent}")
    if outcome.state == "SUCCEEDED":
        typer.echo(where)
        return
    if outcome.state == "CANCELLED":
        raise OperationFailed(f"job {job.job_id} stopped by the user; every replica was stopped",
                              exit_code=outcome.exit_code)
    if rejected:  # the trainer's own bad-input exit: its one line, exit code 2
        said = (outcome.traceback.strip().splitlines() or [""])[-1].removeprefix("error: ")
        raise UsageError(f"job {job.job_id} failed: {outcome.failed} rejected its input: {said}",
                         hint="fix the trainer arguments after -- (they reach it exactly as written)")
    # its traceback was streamed above with the replica's name: said once, not repeated here
    last = (outcome.traceback.strip().splitlines() or [""])[-1].strip() \
        if outcome.traceback.startswith("Traceback (most recent call last)") else ""  # a killed replica has none
    log = run.logs.get(outcome.failed) if outcome.failed else None
    raise OperationFailed(f"job {job.job_id} failed: {outcome.reason}" + (f" ({last})" if last else "") +
                          "; the other replicas were stopped",
                          hint=f"its traceback is above; the whole log: less {log}; {where}" if log else
                          f"its output is above; {where}")
