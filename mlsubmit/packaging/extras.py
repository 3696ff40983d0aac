"""The job's other packages (`--extra-packages PATH,…`, gcloud's `--packages` / `--python-package-uris`).

Each one is a built archive (`.tar.gz`, `.whl`, `.zip`), a package directory (built here like the trainer, with
`build_sdist`), or a `gs://` URI that is already staged. Local ones are staged content-addressed beside the
trainer's package and listed in `packageUris` before it (after mlsubmit-runtime's), so they are installed before
the trainer's package everywhere: by the container command a request carries, in the venvs of `train --local`, the
emulator and the pre-flight. A trainer may require one of them that no package index has.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from mlsubmit.errors import invalid_value

ARCHIVES = (".tar.gz", ".tgz", ".whl", ".zip")


@dataclass(frozen=True)
class ExtraPackage:
    """One extra package: a local archive (`path`, its sha256) or a staged `gs://` URI (`uri`)."""

    given: str
    path: Path | None = None
    sha256: str | None = None
    uri: str | None = None


def split_paths(values: list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """`--extra-packages a.whl,b.tar.gz --extra-packages c` → ('a.whl', 'b.tar.gz', 'c')."""
    return tuple(dict.fromkeys(p.strip() for value in values or () for p in value.split(",") if p.strip()))


def resolve_extras(values: list[str] | tuple[str, ...] | None, *, flag: str = "--extra-packages") \
        -> tuple[ExtraPackage, ...]:
    """Check and, for package directories, build each extra package (into $MLSUBMIT_HOME/sdists/extra).

    Raises:
        UsageError: a path that does not exist or is neither an archive nor a package directory.
    """
    from mlsubmit.cache import ownership
    from mlsubmit.cloud import storage
    from mlsubmit.packaging.sdist import build_sdist
    from mlsubmit.local.venvs import mlsubmit_home

    found = []
    for given in split_paths(values):
        if storage.is_gcs(given):
            storage.split_gcs(given)
            found.append(ExtraPackage(given, uri=given))
            continue
        path = Path(given)
        allowed = "a package archive (.tar.gz, .whl, .zip), a package directory or a gs:// URI"
        if path.is_dir():
            path = ownership.record(build_sdist(path, dist_dir=mlsubmit_home() / "sdists" / "extra").path, "sdist")
        elif not path.is_file():
            raise invalid_value(flag, given, allowed, hint="it does not exist")
        elif not path.name.endswith(ARCHIVES):
            raise invalid_value(flag, given, allowed)
        path = path.resolve()
        found.append(ExtraPackage(given, path, hashlib.sha256(path.read_bytes()).hexdigest()))
    return tuple(found)


def staged_names(extras: tuple[ExtraPackage, ...] | list[ExtraPackage]) -> tuple[str, ...]:
    """The distribution names the job's other packages install (from a local archive's metadata, or a staged URI's
    file name: `helperpkg-0.3.tar.gz`, `dep-2.0-py3-none-any.whl`): a requirement of the trainer's that one of them
    satisfies is never looked up on a package index (it may be on none)."""
    from mlsubmit.images.sdists import distribution_name

    names = []
    for extra in extras:
        if extra.path is not None:
            names.append(distribution_name(extra.path))
            continue
        filename = str(extra.uri).rsplit("/", 1)[-1]
        if filename.endswith(".whl"):
            names.append(filename.split("-", 1)[0])
        elif filename.endswith(ARCHIVES) and "-" in filename:
            names.append(filename.rsplit("-", 1)[0])
    return tuple(names)
