"""The job-spec options, defined once: `mlsubmit config` and `mlsubmit train` take exactly these.

Decorate a command with `@with_spec_options` and register it with `cls=SpecCommand`: its signature gains
every option below (and the trainer arguments after `--`), and the function receives them as one dict
argument `spec_flags`, which `spec_from_options(spec_flags, target=...)` turns into a validated JobSpec.
Choices and help come from `mlsubmit.jobspec.machines`. Flags override the values of a `--config` YAML.

Example (mlsubmit/commands/train.py):
    def register(app):
        app.command("train", cls=SpecCommand)(with_spec_options(train))

    def train(spec_flags, local: bool = False):
        spec, notes = spec_from_options(spec_flags, target="local" if local else "cloud")
"""

import functools
import inspect
from typing import Annotated, Any, Callable, List, Optional

import typer
from typer.core import TyperCommand

from mlsubmit.images import catalog as images_catalog
from mlsubmit.jobspec import machines
from mlsubmit._typer_fast import PlainCoercion
from mlsubmit.errors import UsageError, invalid_value

_PANEL = "Job spec (flags override --config YAML)"
_TRAINER_ARGS = "mlsubmit.trainer_args"  # ctx.meta key: the arguments after --
_REPEATABLE = ("label", "labels", "env")
_SWITCHES = ("spot", "flex_start", "disable_retries", "restart_job_on_worker_restart")
_CAPACITY = "Capacity (Vertex AI scheduling; flags override --config YAML)"


def _option(*names: str, help: str, metavar: Optional[str] = None, multiple: bool = False) -> Any:
    """An option of the spec panel; a second name is gcloud's spelling of the same thing."""
    kind = List[str] if multiple else Optional[str]
    return Annotated[kind, typer.Option(*names, help=help, metavar=metavar, rich_help_panel=_PANEL,
                                        show_default=False)]


def _python_help() -> str:
    """--python-version's help, from the tables: ml.v1's runtime/Python pairs and the TensorFlow versions whose
    images differ by Python (which Vertex AI no longer serves is said: those run only here)."""
    pythons: dict[str, set[str]] = {}
    for image in images_catalog.IMAGES:
        if image.framework == "tensorflow" and not image.carrier:
            pythons.setdefault(image.version, set()).add(image.python)
    several = sorted((v for v, p in pythons.items() if len(p) > 1), key=images_catalog.version_key)
    named = ", ".join(f"{v} ({' or '.join(sorted(pythons[v], key=images_catalog.version_key))})" for v in several)
    retired = not any(images_catalog.available(i) for i in images_catalog.IMAGES if i.version in several
                      and i.framework == "tensorflow" and not i.carrier)
    return (f"Python of the runtime: legacy pythonVersion, on the pairs ml.v1 offered "
            f"({images_catalog.legacy_pairs()}); elsewhere it picks among a TensorFlow version's images: {named}"
            f"{' (retired on Vertex AI: they run with --local)' if retired else ''}.")


SPEC_OPTIONS: dict[str, Any] = {
    "config": _option("--config", metavar="FILE", help="A legacy `trainingInput:` YAML or a Vertex AI "
                      "CustomJobSpec YAML to start from; every flag given here overrides its value."),
    "tier": _option("--tier", "--scale-tier", metavar="|".join(machines.TIERS), help="Scale tier (see the table "
                    "below; any case, - or _: basic-gpu). Without it, any machine or count option means CUSTOM."),
    "gpus": _option("--gpus", metavar="N", help=f"GPUs on the chief (CUSTOM). Without --machine-type picks "
                    f"{', '.join(f'{n}: {m}' for n, m in machines.DEFAULT_GPU_MACHINE.items())}."),
    "gpu_type": _option("--gpu-type", metavar="TYPE", help=f"Accelerator type (default: {machines.DEFAULT_GPU_TYPE})"
                        f"; one of {', '.join(machines.ACCELERATORS)}."),
    "machine_type": _option("--machine-type", "--master-machine-type", metavar="TYPE", help="The chief's machine: n1-*, a2-*, a3-*, g2-* "
                            "or a legacy type (standard, complex_model_m_gpu, …); see the table below."),
    "workers": _option("--workers", "--worker-count", metavar="N", help="Worker replicas (CUSTOM); same machine as the chief "
                       "unless --worker-machine-type."),
    "ps": _option("--ps", "--parameter-server-count", metavar="N", help="Parameter servers (CUSTOM)."),
    "evaluators": _option("--evaluators", "--evaluator-count", metavar="N", help="Evaluator replicas (CUSTOM); chief's machine."),
    "worker_machine_type": _option("--worker-machine-type", metavar="TYPE", help="Workers' machine "
                                   "(cloud-tpu for the one TPU worker)."),
    "ps_machine_type": _option("--ps-machine-type", "--parameter-server-machine-type", metavar="TYPE",
                               help=f"Parameter servers' machine (default: {machines.DEFAULT_CPU_MACHINE})."),
    "region": _option("--region", metavar="REGION", help=f"(default: {machines.DEFAULT_REGION}) One of "
                      f"{', '.join(machines.REGIONS)}."),
    "runtime_version": _option("--runtime-version", metavar="X.Y", help="TensorFlow runtime version "
                               f"(default: legacy {machines.DEFAULT_RUNTIME_VERSION}; Vertex AI "
                               f"{images_catalog.DEFAULT_TENSORFLOW} on the public tensorflow/tensorflow image, run as "
                               "a custom container; a TPU pool needs --executor-image)."),
    "python_version": _option("--python-version", metavar="X.Y", help=_python_help()),
    "executor_image": _option("--executor-image", "--executor-image-uri", metavar="URI", help="Vertex AI executor image (instead of "
                              "--runtime-version)."),
    "python_module": _option("--python-module", "--module-name", metavar="MODULE", help="Module the job runs, "
                             "and the pre-flight checks (default: trainer.task)."),
    "max_runtime": _option("--max-runtime", metavar="DURATION", help="Cancel the job after this long: 7200s, "
                           "90m, 2h, 1h30m (default: the service's, 7 days)."),
    "job_dir": _option("--job-dir", metavar="PATH", help="Output directory (gs:// for cloud jobs): Vertex AI's "
                       "base output directory (AIP_MODEL_DIR, …); legacy AI Platform also passes it as --job-dir."),
    "job_name": _option("--job-name", "--display-name", metavar="NAME", help="Job id (legacy: letters, digits, _) / display name "
                        "(Vertex AI, at most 128 characters)."),
    "label": _option("--label", metavar="KEY=VALUE", multiple=True, help="Job label; repeatable."),
    "labels": _option("--labels", metavar="KEY=VALUE,…", multiple=True, help="Job labels, as gcloud takes them."),
    "max_cost": _option("--max-cost", metavar="USD", help="Budget: the job's time limit is set so that it cannot "
                        "cost more at the price table's rates (the smaller of it and --max-runtime wins)."),
    "spot": Annotated[bool, typer.Option("--spot", rich_help_panel=_PANEL, help="Run on spot capacity (Vertex AI "
                                         "scheduling.strategy SPOT; GKE spot nodes): cheaper, preemptible; the job "
                                         "resumes from its backup (AIP_CHECKPOINT_DIR).")],
    "flex_start": Annotated[bool, typer.Option("--flex-start", rich_help_panel=_CAPACITY, help="Wait for the GPUs "
                                               "instead of failing without them (scheduling.strategy FLEX_START, "
                                               "Dynamic Workload Scheduler: L4, A100, H100, H200, B200; every pool "
                                               "the same machine; at most 7 days' runtime).")],
    "max_wait": Annotated[Optional[str], typer.Option(
        "--max-wait-duration", metavar="DURATION", rich_help_panel=_CAPACITY, show_default=False,
        help="How long a --flex-start job waits for its resources: 2h, 90m, 1d; 0 waits indefinitely (default: "
             "the service's 24 hours).")],
    "reservation_affinity": Annotated[Optional[str], typer.Option(
        "--reservation-affinity", metavar="reservation-affinity-type=TYPE[,key=KEY,values=V1;V2]",
        rich_help_panel=_CAPACITY, show_default=False,
        help="Draw the machines from reservations, as gcloud spells it: NO_RESERVATION, ANY_RESERVATION or "
             "SPECIFIC_RESERVATION (key=compute.googleapis.com/reservation-name,values=RESERVATION).")],
    "reservation": Annotated[Optional[str], typer.Option(
        "--reservation", metavar="NAME", rich_help_panel=_CAPACITY, show_default=False,
        help="Draw the machines from this one reservation (NAME or projects/P/zones/Z/reservations/NAME).")],
    "disable_retries": Annotated[bool, typer.Option("--disable-retries", rich_help_panel=_CAPACITY,
                                                    help="Do not retry the job after internal errors once it runs "
                                                         "(scheduling.disableRetries).")],
    "restart_job_on_worker_restart": Annotated[bool, typer.Option(
        "--restart-job-on-worker-restart", rich_help_panel=_CAPACITY,
        help="Restart the whole job when a worker restarts (scheduling.restartJobOnWorkerRestart), for training "
             "that cannot take a worker leaving and joining.")],
    "env": _option("--env", metavar="KEY=VALUE", multiple=True, help="Environment variable of every replica "
                   "(Vertex AI pythonPackageSpec.env; --local too); repeatable. Legacy AI Platform has none."),
}
CLOUD_REGION_HELP = ("The job's region. A cloud job takes it from here, else from the --config YAML, MLSUBMIT_REGION, "
                     "CLOUDSDK_COMPUTE_REGION or the gcloud configuration (ai/region, compute/region), and is refused "
                     f"without one; --local and --target default to {machines.DEFAULT_REGION}. One of "
                     f"{', '.join(machines.REGIONS)}.")
TRAINER_ARGS = Annotated[Optional[List[str]], typer.Argument(metavar="[-- TRAINER_ARGS...]", show_default=False,
                                                             help="Arguments for the trainer, after --.")]


def with_spec_options(command: Callable[..., Any], *, region_help: Optional[str] = None) -> Callable[..., Any]:
    """Add SPEC_OPTIONS and the trainer arguments to `command`, which receives them as `spec_flags` (a dict).
    `region_help`: the --region help of a command whose region does not default as `config`'s does (`train`)."""
    own = [p for p in inspect.signature(command).parameters.values() if p.name != "spec_flags"]
    options = dict(SPEC_OPTIONS)
    if region_help is not None:
        options["region"] = _option("--region", metavar="REGION", help=region_help)
    added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=kind,
                               default=[] if name in _REPEATABLE else False if name in _SWITCHES else None)
             for name, kind in options.items()]
    added.append(inspect.Parameter("trainer_args", inspect.Parameter.KEYWORD_ONLY, annotation=TRAINER_ARGS,
                                   default=None))
    added.append(inspect.Parameter("spec_context", inspect.Parameter.KEYWORD_ONLY, annotation=typer.Context))
    names = {p.name for p in added} - {"spec_context"}

    @functools.wraps(command)
    def wrapper(**values: Any) -> Any:
        flags = {k: v for k, v in values.items() if k in names}
        if flags["trainer_args"]:
            stray = " ".join(flags["trainer_args"])
            raise invalid_value("arguments", stray, "options only",
                                hint=f"put trainer arguments after --: … -- {stray}")
        flags["trainer_args"] = values.pop("spec_context").meta.get(_TRAINER_ARGS)
        return command(spec_flags=flags, **{k: v for k, v in values.items() if k not in names})

    own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]
    wrapper.__signature__ = inspect.Signature(own + added)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in own + added}
    return wrapper


class SpecCommand(PlainCoercion, TyperCommand):
    """The typer command class for commands with the spec options: no pydantic per option (_typer_fast), and
    everything after `--` kept verbatim as trainer arguments (a stray positional before it is an error)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        from mlsubmit.gcloud_flags import unsupported

        if "--" in args:
            cut = args.index("--")
            ctx.meta[_TRAINER_ARGS] = args[cut + 1:]
            args = args[:cut]
        refused = unsupported(args)
        if refused:
            flag, why, instead = refused
            raise UsageError(f"gcloud's {flag} is not supported by mlsubmit: {why}", hint=instead)
        return super().parse_args(ctx, args)


def spec_from_options(flags: dict[str, Any], *, target: str = "cloud", where: str = "--local"):
    """The validated JobSpec for these option values (merged over --config), and notes on unmapped settings.

    Args:
        flags: the `spec_flags` dict a `@with_spec_options` command receives.
        target: "cloud" (gs:// job dir required) or "local".
        where: with target "local", where the job runs, as the user chose it ("--local", "--target kubernetes"):
            what errors about cloud-only settings name.
    Returns:
        (JobSpec, notes)
    Raises:
        UsageError: the first invalid value, named as the user gave it.
    """
    from mlsubmit.jobspec.spec_input import FLAG_NAMES, RoleDraft, SpecDraft, build_spec, load_yaml, merge

    labels = _pairs([("--label", item) for item in flags.get("label") or ()]
                    + [("--labels", item) for value in flags.get("labels") or () for item in value.split(",") if item])
    env = _pairs([("--env", item) for item in flags.get("env") or ()])
    given = SpecDraft(
        tier=flags.get("tier"),
        chief=RoleDraft(machine_type=flags.get("machine_type"), accelerator_type=flags.get("gpu_type"),
                        accelerator_count=flags.get("gpus")),
        worker=RoleDraft(count=flags.get("workers"), machine_type=flags.get("worker_machine_type")),
        ps=RoleDraft(count=flags.get("ps"), machine_type=flags.get("ps_machine_type")),
        evaluator=RoleDraft(count=flags.get("evaluators")),
        region=flags.get("region"), runtime_version=flags.get("runtime_version"),
        python_version=flags.get("python_version"),
        executor_image=flags.get("executor_image"), python_module=flags.get("python_module"),
        args=tuple(flags["trainer_args"]) if flags.get("trainer_args") else None,
        job_dir=flags.get("job_dir"), job_name=flags.get("job_name"),
        labels=labels, env=env, max_runtime=flags.get("max_runtime"), spot=True if flags.get("spot") else None,
        flex_start=flags.get("flex_start") or None, max_wait=flags.get("max_wait"),
        reservation=_reservation(flags), disable_retries=flags.get("disable_retries") or None,
        restart_job_on_worker_restart=flags.get("restart_job_on_worker_restart") or None,
        names={**FLAG_NAMES, **({"reservation": "--reservation"} if flags.get("reservation") is not None else {})})
    notes: list[str] = []
    if flags.get("config"):
        from_yaml, notes = load_yaml(flags["config"])
        given = merge(from_yaml, given)
    spec = build_spec(given, target=target)
    if target == "local" and (flags.get("spot") or flags.get("max_cost") or not spec.capacity.empty):
        given = "--spot" if flags.get("spot") else f"--max-cost {flags['max_cost']}" if flags.get("max_cost") \
            else spec.capacity.given()[0]
        why = "this machine costs nothing and is never preempted" if where == "--local" else \
            "a cluster of your own runs on the machines it has: no FLEX_START, reservation or retry settings"
        raise UsageError(f"invalid option with {where}: {given} ({why})", hint=f"drop {given.split()[0]}")
    return spec, notes


def _reservation(flags: dict[str, Any]) -> Any:
    """--reservation-affinity (gcloud's form) or --reservation NAME, as a scheduling.Reservation; None if neither."""
    from mlsubmit.jobspec import scheduling

    affinity, name = flags.get("reservation_affinity"), flags.get("reservation")
    if affinity is not None and name is not None:  # '' is a value given, never read as "none"
        raise UsageError("invalid options: received both --reservation-affinity and --reservation; expected one",
                         hint="--reservation NAME is --reservation-affinity reservation-affinity-type="
                              "SPECIFIC_RESERVATION,key=compute.googleapis.com/reservation-name,values=NAME")
    if affinity is not None:
        return scheduling.parse_reservation_affinity(affinity)
    return scheduling.named_reservation(name) if name is not None else None


def budget_from_options(flags: dict[str, Any]) -> Optional[float]:
    """The `--max-cost` of these option values in USD, or None."""
    from mlsubmit.jobspec.cost import parse_budget

    return None if flags.get("max_cost") is None else parse_budget(flags["max_cost"])


def budgeted(spec: Any, spec_flags: dict[str, Any], tuning: Any = None, backends: int = 1,
             catalog: str = "vertex") -> tuple[Any, list[str]]:
    """The spec with the time limit --max-cost allows, and the cost estimate's lines (for stderr: stdout keeps the
    document). A tuning study runs its parallel trials at once and its maximum in all; --backends one job each."""
    from mlsubmit.jobspec import cost

    parallel = (tuning.parallel_trials if tuning is not None else 1) * backends
    total = (tuning.max_trials if tuning is not None else 1) * backends
    per = "trials" if tuning is not None else "backends"
    spec, budget = cost.apply_budget(spec, budget_from_options(spec_flags), catalog=catalog, parallel=parallel,
                                     total=total)
    return spec, cost.estimate_lines(spec, catalog=catalog, parallel=parallel, total=total, per=per, budget=budget)


def _pairs(items: List[tuple[str, str]]) -> Optional[tuple]:
    """(flag, `KEY=VALUE`) items as ((KEY, VALUE), …) in order, the last value of a repeated KEY winning; None if
    none."""
    if not items:
        return None
    pairs: dict[str, str] = {}
    for flag, item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise invalid_value(flag, item, "KEY=VALUE", hint=f"write {flag} {key or 'KEY'}=VALUE")
        pairs[key] = value
    return tuple(pairs.items())


def local_spec(flags: dict[str, Any], *, mapped: str | None = None, more_notes: tuple[str, ...] = (),
               where: str = "--local"):
    """The JobSpec of a `train --local` run (a Python package job), its notes said as warnings first.

    `mapped`: the prefix of notes about what the caller carries out itself (a tuning study's hyperparameters), not
    said; `more_notes`: the caller's own notes, said with them.
    Raises:
        UsageError: an invalid value, or a job without a Python package.
    """
    from mlsubmit.jobspec.requests import require_python_package

    spec, notes = spec_from_options(flags, target="local", where=where)
    require_python_package(spec)
    for note in [*(n for n in notes if not (mapped and n.startswith(mapped))), *more_notes]:
        typer.secho(f"warning: {note}", fg="yellow", err=True)
    return spec
