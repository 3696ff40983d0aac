"""Options shared by the commands that talk to the training service (`mlsubmit train` without --local and
`mlsubmit jobs …`), declared once, and the objects they lead to: settings, clients, a job service (mlsubmit.targets).

`with_options(command, OPTIONS, into="target")` adds the options to `command`'s signature (after its own
parameters) and hands their values to it as one dict argument named `into`.
"""

from __future__ import annotations

import functools
import inspect
from typing import Annotated, Any, Callable, Optional

import typer

from mlsubmit.targets import APIS

_PANEL = "Where (flags, then MLSUBMIT_* / CLOUDSDK_* variables, then the active gcloud configuration)"


def _text(*names: str, metavar: str, help: str) -> Any:
    return Annotated[Optional[str], typer.Option(*names, metavar=metavar, help=help, show_default=False,
                                                 rich_help_panel=_PANEL)]


PROJECT = _text("--project", metavar="PROJECT", help="Google Cloud project (MLSUBMIT_PROJECT, CLOUDSDK_CORE_PROJECT, "
                "gcloud core/project).")
REGION = _text("--region", metavar="REGION", help="Region (MLSUBMIT_REGION, CLOUDSDK_COMPUTE_REGION, gcloud "
               "ai/region or compute/region).")
ENDPOINT = _text("--endpoint", metavar="URL", help="Send every API request here instead of Google Cloud, without "
                 "credentials: the local emulator (`mlsubmit emulator`). Also MLSUBMIT_API_ENDPOINT.")
STAGING = _text("--staging-bucket", metavar="gs://BUCKET[/PREFIX]", help="Where packages are staged "
                "(<bucket>/packages/<sha256>/) and, without --job-dir, jobs write (<bucket>/jobs/<name>). Also "
                "MLSUBMIT_STAGING_BUCKET; default: the job dir.")
API = Annotated[str, typer.Option("--api", metavar="|".join(APIS), help="vertex (Vertex AI custom jobs) or legacy "
                                  "(AI Platform Training, shut down 2025-01-31; kept for compatibility and the "
                                  "emulator).", rich_help_panel=_PANEL)]

TARGET_OPTIONS = {"api": (API, "vertex"), "project": (PROJECT, None), "region": (REGION, None),
                  "endpoint": (ENDPOINT, None)}


def with_options(command: Callable[..., Any], options: dict[str, tuple[Any, Any]], into: str) -> Callable[..., Any]:
    """`command` with `options` ({name: (annotation, default)}) added; their values reach it as dict `into`."""
    own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in inspect.signature(command).parameters.values()
           if p.name != into]
    added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=kind, default=default)
             for name, (kind, default) in options.items()]

    @functools.wraps(command)
    def wrapper(**values: Any) -> Any:
        chosen = {name: values.pop(name) for name in options}
        return command(**values, **{into: chosen})

    wrapper.__signature__ = inspect.Signature(own + added)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in own + added}
    return wrapper


def settings_of(target: dict[str, Any], *, region: str | None = None, staging_bucket: str | None = None,
                need: tuple[str, ...] = ("project", "region")):
    """Resolved settings for these option values (`region` overrides the option, e.g. from a YAML); UsageError
    naming the first of `need` that is set nowhere."""
    from mlsubmit.cloud.settings import resolve

    settings = resolve(project=target.get("project"), region=region or target.get("region"),
                       staging_bucket=staging_bucket, endpoint=target.get("endpoint"))
    return settings.require(*need)


def service_of(api: str, settings: Any):
    """The job service of `api`, with clients built once for the settings' region and endpoint."""
    from mlsubmit.targets import target_for
    from mlsubmit.cloud.clients import Clients

    region = settings.region or "us-central1"
    clients = Clients(region=region, endpoint=settings.endpoint)
    return target_for(api, clients, project=settings.project, region=region)
