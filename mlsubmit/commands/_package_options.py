"""Options about what goes into the job's packages, defined once: `mlsubmit package` and `mlsubmit train` take
them, under the names `gcloud ai custom-jobs local-run` (and `ai-platform jobs submit training`) use."""

from __future__ import annotations

from typing import Annotated, Any, List

import typer

_PANEL = "Packages"

REQUIREMENTS = Annotated[List[str], typer.Option(
    "--requirements", metavar="PKG,…", show_default=False, rich_help_panel=_PANEL,
    help="Requirements added to the package's install requirements (so the cloud installs them too) and "
         "installed where the job runs here; comma-separated, repeatable (gcloud ai custom-jobs local-run).")]
EXTRA_PACKAGES = Annotated[List[str], typer.Option(
    "--extra-packages", "--packages", "--python-package-uris", metavar="PATH,…", show_default=False,
    rich_help_panel=_PANEL,
    help="Other packages of the job: archives (.tar.gz, .whl), package directories (built) or gs:// URIs; staged "
         "beside the trainer's package, listed in packageUris before it, installed before it.")]

PACKAGE_OPTIONS: dict[str, tuple[Any, Any]] = {"requirements": (REQUIREMENTS, []),
                                               "extra_packages": (EXTRA_PACKAGES, [])}
