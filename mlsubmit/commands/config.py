"""`mlsubmit config`: flags and/or a YAML -> one validated job spec -> a Vertex AI or legacy config YAML.

Parses, calls, renders: the rules live in mlsubmit.jobspec.machines / spec / requests.
"""

import os
import tempfile
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from mlsubmit.jobspec import machines
from mlsubmit.commands._spec_options import SpecCommand, with_spec_options
from mlsubmit.errors import did_you_mean, invalid_value

FORMATS = ("vertex", "legacy", "kubernetes")
KUBE_HAS_NO_SCHEDULING = ("the Kubernetes objects carry no FLEX_START, reservation or retry settings: on GKE "
                          "those belong to the node pool")
_EPILOG = "\b\n" + machines.describe_table()  # \b: click prints the table as it is, without rewrapping


def register(app: typer.Typer) -> None:
    app.command("config", cls=SpecCommand, epilog=_EPILOG, no_args_is_help=False)(with_spec_options(config))


def config(
    spec_flags: Any,
    fmt: Annotated[str, typer.Option("--format", metavar="|".join(FORMATS), help="vertex: a CustomJobSpec "
                                     "for `gcloud ai custom-jobs create --config`; legacy: a trainingInput "
                                     "document for `gcloud ai-platform jobs submit training --config`; "
                                     "kubernetes: the job's Kubernetes objects for `kubectl apply -f -`.")] = "vertex",
    output: Annotated[Optional[Path], typer.Option("--output", "-o", metavar="FILE", help="Write here "
                                                   "(atomically) instead of stdout.")] = None,
    hptune_config: Annotated[Optional[Path], typer.Option("--hptune-config", metavar="FILE", help="A tuning "
                             "spec (legacy trainingInput.hyperparameters or a Vertex AI studySpec): writes a "
                             "HyperparameterTuningJob (vertex) or trainingInput.hyperparameters (legacy) over the "
                             "job. A tuning spec inside --config does the same.")] = None,
    namespace: Annotated[str, typer.Option("--namespace", help="kubernetes: the namespace.")] = "default",
    k8s_api: Annotated[str, typer.Option("--k8s-api", metavar="job|jobset|tfjob", help="kubernetes: Indexed Jobs "
                                         "and a headless Service (job), one JobSet, or one TFJob.")] = "job",
    k8s_version: Annotated[str, typer.Option("--k8s-version", help="kubernetes: the cluster version whose "
                                             "schemas the objects are validated against.")] = "1.33",
    max_restarts: Annotated[int, typer.Option("--max-restarts", help="kubernetes --k8s-api jobset: "
                            "failurePolicy.maxRestarts, how often the JobSet recreates its Jobs after a "
                            "failure.")] = 0,
    package_uris: Annotated[Optional[str], typer.Option("--package-uris", metavar="URI,…", help="The staged "
                            "sdists the job installs, in order (`mlsubmit package --stage` prints them): gs://… "
                            "(kubernetes: or a path on the image).")] = None,
) -> None:
    """Write a validated job config (YAML) from flags and/or --config FILE; flags override the YAML.

    Migrates too: `mlsubmit config --config OLD.yaml --format vertex` turns a legacy trainingInput into Vertex
    AI worker pools (and back with --format legacy), warning about every setting that could not be mapped.
    """
    from mlsubmit.jobspec import requests
    from mlsubmit.commands._spec_options import budgeted, spec_from_options

    if fmt not in FORMATS:
        raise invalid_value("--format", fmt, " or ".join(FORMATS), hint=did_you_mean(fmt.lower(), FORMATS))
    spec, notes = spec_from_options(spec_flags)
    if fmt == "kubernetes":
        from mlsubmit.jobspec.scheduling import refuse_without_scheduling
        from mlsubmit.kube.config import config_text

        refuse_without_scheduling(spec.capacity, "--format kubernetes", KUBE_HAS_NO_SCHEDULING, "use --format vertex")

        spec, estimate = budgeted(spec, spec_flags, catalog="compute")  # GKE nodes: Compute Engine prices
        text, notes = config_text(spec, notes, namespace=namespace, k8s_api=k8s_api, k8s_version=k8s_version,
                                  spot=spec.spot, max_restarts=max_restarts,
                                  packages=tuple(filter(None, (package_uris or '').split(','))))
        for note in notes:
            typer.secho(f"warning: {note}", fg="yellow", err=True)
        typer.echo(text, nl=False) if output is None else write_atomically(output, text)
        for line in estimate:
            typer.echo(line, err=True)
        return
    if package_uris:
        spec = spec.replace(package_uris=tuple(filter(None, package_uris.split(","))))
    if fmt == "vertex":  # a retired image: refused when a flag named it, migrated (with a warning) from a file
        from mlsubmit.images import choose

        # not from a file: the image is the flags' (or mlsubmit's default), refused as `train` refuses it
        spec, retired_notes = choose.migrated(spec, named_by_flag=bool(spec_flags.get("runtime_version")
                                                              or spec_flags.get("executor_image")
                                                              or not spec_flags.get("config")))
        notes = notes + retired_notes
    tuning, tuning_notes = tuning_from_options(spec_flags.get("config"), hptune_config)
    spec, estimate = budgeted(spec, spec_flags, tuning)
    if tuning is None:
        document, conversion_notes = requests.config_document(spec, fmt)
        # what the file has no field for (Vertex: region, display name, labels; legacy: the job id) lands here
        comment = requests.vertex_command_comment(spec) if fmt == "vertex" else requests.legacy_command_comment(spec)
    else:
        from mlsubmit.tuning import requests as tuning_requests

        notes = [n for n in notes if not n.startswith("trainingInput.hyperparameters:")] + tuning_notes
        document, conversion_notes = tuning_requests.config_document(tuning, spec, fmt)
        comment = tuning_requests.command_comment(spec, fmt)
    text = comment + requests.to_yaml(document)
    if fmt == "legacy":
        conversion_notes = [*conversion_notes, requests.LEGACY_SHUT_DOWN]
    if output is None:
        typer.echo(text, nl=False)
    else:
        write_atomically(output, text)
    for note in notes + conversion_notes:  # once the document is out: a bad --output stays one line
        typer.secho(f"warning: {note}", fg="yellow", err=True)
    for line in estimate:
        typer.echo(line, err=True)


def tuning_from_options(config: Optional[str], hptune_config: Optional[Path]) -> tuple[Any, list[str]]:
    """The tuning spec of `--hptune-config` (which wins), else the one inside `--config`, and its notes."""
    if hptune_config is None and not config:
        return None, []
    from mlsubmit.tuning import requests as tuning_requests

    if hptune_config is not None:
        return tuning_requests.read_file(hptune_config, only_tuning=True)
    return tuning_requests.read_file(config, only_tuning=False)


def write_atomically(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file in the same folder, so readers never see half a file.

    The file gets the mode a plain `open(path, "w")` would give it: an existing file's, else 0666 less the umask
    (the temporary file is created 0600).
    """
    try:
        folder = path.resolve().parent
        is_folder, in_folder = path.is_dir(), folder.is_dir()
    except (OSError, ValueError) as err:  # a name too long, a NUL in it
        raise invalid_value("--output", str(path), "a file name this system can open",
                            hint=getattr(err, "strerror", None) or str(err)) from None
    if is_folder:
        raise invalid_value("--output", str(path), "a file name, not a directory", hint=f"e.g. -o {path / 'job.yaml'}")
    if not in_folder:
        raise invalid_value("--output", str(path), "a file in an existing folder", hint=f"mkdir -p {folder}")
    try:
        mode = path.stat().st_mode & 0o7777
    except OSError:
        mode = 0o666 & ~_umask()
    try:
        handle = tempfile.NamedTemporaryFile("w", dir=folder, prefix=f".{path.name}.", suffix=".tmp", delete=False,
                                             encoding="utf-8")
    except OSError as err:
        raise invalid_value("--output", str(path), "a file in a folder you can write to", hint=err.strerror) from None
    try:
        with handle:
            handle.write(text)
        os.chmod(handle.name, mode)
        os.replace(handle.name, path)
    except BaseException:
        os.unlink(handle.name)
        raise


def _umask() -> int:
    current = os.umask(0o022)  # the only way to read it is to set it: put it straight back
    os.umask(current)
    return current
