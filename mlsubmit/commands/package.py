"""`mlsubmit package`: build the trainer's reproducible sdist, pre-flight it, stage it once (parse and render)."""

from __future__ import annotations

import json
from typing import Annotated, Optional

import typer

from mlsubmit.commands._package_options import EXTRA_PACKAGES, REQUIREMENTS
from mlsubmit.errors import did_you_mean, invalid_value

_OUTPUTS = ("text", "json")


def _warn_secrets(excluded) -> None:
    for item in excluded:  # credentials, and links that leave the package
        typer.secho(f"warning: {item.warning()}", fg="yellow", err=True)


def _render_dry_run(result, output: str) -> None:
    plan = result.plan
    generated = {name: len(text.encode()) for name, text in plan.generated_files().items()}
    listing = sorted([(name, size, True) for name, size in generated.items()]
                     + [(f.path, f.size, False) for f in plan.files])
    if output == "json":
        typer.echo(json.dumps({
            "dry_run": True, "filename": plan.filename, "uri": result.uri, "sha256": result.sha256,
            "build": plan.build,
            "size": result.size, "total_size": sum(size for _, size, _ in listing),
            "files": [{"path": path, "size": size, "generated": gen} for path, size, gen in listing],
            "skipped": [{"path": s.path, "reason": s.reason} for s in plan.skipped],
            "excluded_secrets": [{"path": e.path, "reason": e.reason} for e in plan.excluded_secrets]}))
        return
    total = sum(size for _, size, _ in listing)
    typer.echo(f"{plan.filename} would hold {len(listing)} files, {total:,} bytes before compression:")
    for path, size, gen in listing:
        typer.echo(f"  {size:>10,}  {path}{'  (generated)' if gen else ''}")
    for skipped in plan.skipped:
        typer.echo(f"  {'left out':>10}  {skipped.path}  ({skipped.reason})")
    typer.echo(f"sha256    {result.sha256} ({result.size:,} bytes compressed)")
    typer.echo(f"build     {plan.build}")
    if result.uri:
        typer.echo(f"would stage to {result.uri}")
    typer.echo("nothing written (--dry-run)" if plan.prebuilt is None else
               "nothing written beside the package (--dry-run; its backend built it into mlsubmit's cache)")


def _render(result, output: str, runtime=None, image=None, image_check: str | None = None) -> None:
    sdist, checked, staged = result.sdist, result.preflight, result.staged
    if output == "json":
        typer.echo(json.dumps({
            "image": {"uri": image.uri, "how": image.how, "name": image.image.name if image.image else None,
                      "python": image.image.python if image.image else None, "check": image_check}
            if image is not None else None,
            "runtime": {"path": str(runtime.sdist.path), "sha256": runtime.sdist.sha256,
                        "uri": runtime.staged.uri if runtime.staged else None} if runtime else None,
            "uri": staged.uri if staged else None, "path": str(sdist.path), "sha256": sdist.sha256,
            "size": sdist.size, "files": list(sdist.files), "build": result.build,
            "uploaded": bool(staged and staged.uploaded),
            "bytes_sent": staged.bytes_sent if staged else 0, "extra_packages": [e.uri for e in result.extras],
            "preflight": ({"module": checked.module, "check": checked.check, "seconds": round(checked.seconds, 2),
                           "cached": checked.cached, "environment": checked.environment}
                          if checked else "skipped"),
            "excluded_secrets": [{"path": e.path, "reason": e.reason} for e in sdist.excluded_secrets]}))
        return
    typer.echo(f"built     {sdist.path} ({len(sdist.files)} files, {sdist.size:,} bytes)")
    typer.echo(f"build     {result.build}")
    typer.echo(f"sha256    {sdist.sha256}")
    if image is not None:
        typer.echo(f"image     {image.describe()}")
        if image_check:
            typer.echo(f"checked   {image_check}")
    if checked is None:
        typer.echo("preflight skipped (--skip-preflight)")
    else:
        added = f", requirements installed: {', '.join(checked.installed)}" if checked.installed else ""
        if checked.cached:
            typer.echo(f"preflight ok: this sdist passed it before (installed in a fresh venv on "
                       f"{checked.environment}{added}; {checked.check}); not repeated")
        else:
            typer.echo(f"preflight ok: installed in a fresh venv on {checked.environment}{added}; {checked.check} "
                       f"({checked.seconds:.1f} s)")
    for placed in (staged, *result.extras) if staged is not None else ():
        sent = f"{'uploaded' if placed.uploaded else 'already staged'}, {placed.bytes_sent:,} bytes sent"
        typer.echo(f"staged    {placed.uri} ({sent})")
    if runtime is not None:  # the package requires or imports mlsubmit_runtime: the job needs both
        where = f", staged {runtime.staged.uri}" if runtime.staged else ""
        typer.echo(f"runtime   {runtime.sdist.path} (the package uses mlsubmit_runtime{where}; list it before "
                   "the package in the job's package URIs)")


def package_command(
    package_path: Annotated[str, typer.Option("--package-path", metavar="DIR",
                                              help="The package directory (it needs an __init__.py).")] = "trainer",
    setup_py: Annotated[Optional[str], typer.Option(
        "--setup-py", metavar="PATH", show_default=False,
        help="setup.py to read NAME, VERSION, REQUIRED_PACKAGES from, without running it. Default: the one "
             "beside the package; without one, the package's name and version 0.0.0.")] = None,
    dist_dir: Annotated[Optional[str], typer.Option("--dist-dir", metavar="DIR", show_default=False,
                                                    help="Where the sdist goes. Default: dist/ beside the "
                                                         "package.")] = None,
    stage_to: Annotated[Optional[str], typer.Option(
        "--stage", metavar="gs://BUCKET/PREFIX|DIR", show_default=False,
        help="Stage to PREFIX/packages/<sha256>/<file>.tar.gz; skipped when the same bytes are there.")] = None,
    module: Annotated[Optional[str], typer.Option("--module", "--module-name", "--python-module", metavar="MODULE",
                                                  show_default=False,
                                                  help="Module the job will run; the pre-flight finds and "
                                                       "compiles it without running it. Default: <package>.task, "
                                                       "else the package.")] = None,
    requirements: REQUIREMENTS = [],
    extra_packages: EXTRA_PACKAGES = [],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List the files and sizes; write nothing.")] = False,
    skip_preflight: Annotated[bool, typer.Option("--skip-preflight",
                                                 help="Do not install the sdist into a fresh venv first.")] = False,
    output: Annotated[str, typer.Option("--output", metavar="text|json", help="Output format.")] = "text",
    runtime_version: Annotated[Optional[str], typer.Option(
        "--runtime-version", metavar="X.Y", show_default=False,
        help="Check on the image of this TensorFlow runtime (as `train` would run it).")] = None,
    executor_image: Annotated[Optional[str], typer.Option(
        "--executor-image", "--executor-image-uri", metavar="URI", show_default=False,
        help="Check on this image (a prebuilt image, or any image the package runs on as a custom container).")] = None,
    python_version: Annotated[Optional[str], typer.Option(
        "--python-version", metavar="X.Y", show_default=False, help="Python of the runtime.")] = None,
    api: Annotated[str, typer.Option("--api", metavar="vertex|legacy",
                                     help="The service whose image the check uses (legacy: its runtime).")] = "vertex",
) -> None:
    """Build the trainer's reproducible sdist (no .git, venvs, caches or credentials), check that it installs
    offline in a fresh venv, and stage it content-addressed so an unchanged package is never sent twice."""
    if output not in _OUTPUTS:
        raise invalid_value("--output", output, "text or json", hint=did_you_mean(output, _OUTPUTS))
    from mlsubmit import packaging
    from mlsubmit.packaging.requirements_txt import split_requirements

    wanted = split_requirements(requirements)
    choice = _image(runtime_version, executor_image, python_version, api)  # refused as `train` refuses it, dry or not
    if dry_run:
        planned = packaging.dry_run(package_path, setup_py=setup_py, stage_to=stage_to, requirements=wanted)
        _warn_secrets(planned.plan.excluded_secrets)
        _render_dry_run(planned, output)
        return
    from mlsubmit.cloud.storage import RetryPolicy

    retry = RetryPolicy.from_env()
    if stage_to is not None:
        packaging.check_destination(stage_to)
    extras = packaging.resolve_extras(extra_packages)
    plan = packaging.plan_sdist(package_path, setup_py, wanted)
    _warn_secrets(plan.excluded_secrets)
    checked, warnings = _check_on_image(plan, choice, packaging.staged_names(extras))
    base = None
    if not skip_preflight and choice.image is not None:
        from mlsubmit.packaging.preflight import base_env

        base = base_env(choice.image, lambda text: typer.echo(text, err=True))
    result = packaging.package_plan(plan, dist_dir=dist_dir, module=module, check=not skip_preflight,
                                    stage_to=stage_to, retry=retry, show_progress=True, extras=extras, base=base)
    from mlsubmit.packaging.runtime_dist import package_runtime

    for warning in warnings:  # once the package passed: a refusal stays one line
        typer.secho(f"warning: {warning}", fg="yellow", err=True)
    _render(result, output, package_runtime(plan, dist_dir=dist_dir, stage_to=stage_to, retry=retry), choice,
            checked)


def _image(runtime_version, executor_image, python_version, api):
    """The image a job with these flags runs (mlsubmit.images.choose): the package is checked on any image `train
    --local` runs it on, a retired one with the warning `train --local` gives (the service no longer serves it)."""
    from mlsubmit.images import choose
    from mlsubmit.jobspec.spec import JobSpec

    if api not in choose.APIS:
        raise invalid_value("--api", api, " or ".join(choose.APIS), hint=did_you_mean(api, choose.APIS))
    spec = JobSpec(runtime_version=runtime_version, executor_image=executor_image, python_version=python_version,
                   target="local")
    choose.served(spec, lambda text: typer.secho(text, fg="yellow", err=True), api=api, sending=False)
    for note in choose.python_notes(spec, api=api):
        typer.secho(f"warning: {note}", fg="yellow", err=True)
    return choose.choose(spec, api=api)


def _check_on_image(plan, choice, extras: tuple[str, ...] = ()) -> tuple[str | None, list[str]]:
    """The package's requirements and syntax against the image (mlsubmit.images.check), in words (None for an
    image mlsubmit does not know), and the warnings to show once the package passed. `--skip-preflight` skips the
    install check only: this one is what the service's image would refuse.

    Raises:
        UsageError: a requirement the image cannot take, syntax its Python cannot parse."""
    if choice.image is None:
        return None, [f"mlsubmit does not know {choice.uri}: the package is not checked against its software"]
    from mlsubmit.images.check import check, describe
    from mlsubmit.packaging.runtime_dist import DISTRIBUTION
    from mlsubmit.packaging.sdist import archive_digest

    sha256, _ = archive_digest(plan)  # computed in memory: the archive is written once, by package_plan
    result = check(plan.metadata.requires, [(f.path, f.source) for f in plan.files], sha256, choice.image,
                   staged=(DISTRIBUTION, *extras), project=plan.package_dir.parent)
    for note in result.replaced:  # as `train --local` and the emulator say it
        typer.echo(f"note: {note}", err=True)
    return describe(result, choice.image), list(result.warnings)


def register(app: typer.Typer) -> None:
    app.command("package")(package_command)
