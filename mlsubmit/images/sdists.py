"""What an sdist (or a wheel) says about itself, read without installing it: its distribution name, one of its
files. The images' job environments and the packaging pre-flight both need it; it lives here so that
`mlsubmit.images` never imports `mlsubmit.packaging` (the one direction: packaging asks images)."""

from __future__ import annotations

import email.parser
import tarfile
import zipfile
from pathlib import Path

from mlsubmit.errors import UsageError


def sdist_file(path: Path, name: str) -> str | None:
    with tarfile.open(path, "r:gz") as tar:
        top = tar.getnames()[0].split("/", 1)[0]
        try:
            handle = tar.extractfile(f"{top}/{name}")
        except KeyError:
            return None
        return handle.read().decode("utf-8") if handle else None


def _metadata(path: Path):
    if path.name.endswith(".whl"):
        with zipfile.ZipFile(path) as wheel:
            meta = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
            text = wheel.read(meta).decode("utf-8")
    else:
        text = sdist_file(path, "PKG-INFO") or ""
    return email.parser.Parser().parsestr(text)


def requires(path: Path) -> list[str]:
    """The requirements (Requires-Dist) an sdist's PKG-INFO (or a wheel's METADATA) states; none where it states
    none (an old sdist may not)."""
    return list(_metadata(Path(path)).get_all("Requires-Dist") or ())


def distribution_name(path: Path) -> str:
    """The distribution name an sdist's PKG-INFO (or a wheel's METADATA) states."""
    name = _metadata(path)["Name"]
    if not name:
        raise UsageError(f"{path.name} has no package metadata (PKG-INFO)", hint="build it with a build frontend")
    return name
