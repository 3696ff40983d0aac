"""Build an sdist through a real build frontend (pypa/build) when its metadata cannot be read statically.

A `pyproject.toml` project (any build backend: hatchling, setuptools, flit, pdm …) or a `setup.py` that computes
its metadata is built the way pip would build it: `python -m build --sdist` in an isolated environment whose
backend pip fetches from your index (your pip configuration applies) — except where the backend is setuptools
and mlsubmit's environment has a setuptools the project accepts: then without isolation, as the offline
pre-flight installs (seconds saved per build, the same sdist). The build runs on a copy of the project
holding exactly the files mlsubmit would package (ignore rules honoured, credentials left out), so the user's
tree gets no `*.egg-info` and no secret reaches the backend. `SOURCE_DATE_EPOCH` is set (default 1980-01-01),
which hatchling and flit honour; setuptools' sdists carry the build time in their members and gzip header, so
the archive is then normalised like the in-process build's (sorted members, SOURCE_DATE_EPOCH mtimes, owner 0,
gzip mtime 0; contents untouched): the same sources give the same bytes whatever the backend. The result is
cached under `$MLSUBMIT_HOME/sdists/<sha256 of the project's files and SOURCE_DATE_EPOCH>/`, so an unchanged
project is built once.
"""

from __future__ import annotations

import email.parser
import gzip
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mlsubmit.cache import ownership
from mlsubmit.errors import UsageError
from mlsubmit.packaging.credentials import credential_reason
from mlsubmit.packaging.requirements import builds_here
from mlsubmit.packaging.ignore import walk
from mlsubmit.packaging.setup_meta import ProjectMetadata

DEFAULT_EPOCH = "315532800"  # 1980-01-01, as the in-process build
_EXCEPTION = re.compile(r"^(?:[\w.]+\.)?(\w*(?:Error|Exception)|error): (.+)$")


@dataclass(frozen=True)
class FrontendSdist:
    """An sdist the frontend built: its file, the metadata its PKG-INFO states, its members, its backend."""

    path: Path
    metadata: ProjectMetadata
    members: tuple[str, ...]
    backend: str
    isolated: bool  # built in an isolated environment (else with mlsubmit's setuptools)
    cached: bool


def project_files(project_dir: Path) -> tuple[list[tuple[str, Path]], list[str]]:
    """The project's files mlsubmit would package ((path relative to the project, file)), and the credentials
    left out."""
    kept, _ = walk(project_dir)
    prefix = project_dir.name + "/"
    files: list[tuple[str, Path]] = []
    secrets: list[str] = []
    for rel, source in kept:
        if credential_reason(source) is None:
            files.append((rel[len(prefix):], source))
        else:
            secrets.append(rel[len(prefix):])
    return files, secrets


def tree_digest(files: list[tuple[str, Path]]) -> str:
    """sha256 over the files' paths, executable bits and bytes (what the backend will see)."""
    digest = hashlib.sha256()
    for rel, source in files:
        digest.update(f"{rel}\0{int(os.access(source, os.X_OK))}\0{source.stat().st_size}\0".encode())
        digest.update(source.read_bytes())
    return digest.hexdigest()


def build_system(project_dir: Path) -> dict:
    """pyproject.toml's `[build-system]` table, with pip's defaults (setuptools' legacy backend) filled in."""
    table: dict = {}
    pyproject = project_dir / "pyproject.toml"
    if pyproject.is_file():
        from mlsubmit.packaging.toml import TOMLDecodeError, loads

        try:
            table = loads(pyproject.read_text(encoding="utf-8")).get("build-system", {})
        except (TOMLDecodeError, UnicodeDecodeError) as err:
            raise UsageError(f"cannot read {pyproject}: {err}", hint="fix the TOML") from None
    return {"build-backend": table.get("build-backend") or "setuptools.build_meta:__legacy__",
            "requires": table.get("requires", ["setuptools>=40.8.0"])}


def cause(output: str) -> str:
    """The frontend's output shortened to its cause: the last exception line, else its ERROR line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in reversed(lines):
        found = _EXCEPTION.match(line)
        if found and not line.startswith("subprocess.CalledProcessError"):
            return line
    for line in reversed(lines):
        if line.startswith(("ERROR", "error:")):
            return line.removeprefix("ERROR").strip()
    return lines[-1] if lines else "(no output)"


def missing_file_hint(said: str) -> str | None:
    """For a build that failed on a file its setup.py reads (`FileNotFoundError: … 'requirements.txt'`): how to
    ship that file in the sdist; else None."""
    import re

    found = re.search(r"(?:FileNotFoundError|No such file or directory)\S*:? .*?'([^']+)'", said)
    if not found:
        return None
    name = found.group(1)
    return (f"the setup.py reads {Path(name).name}, which the sdist does not carry: ship it (a MANIFEST.in line "
            f"`include {Path(name).name}`, or package data), or stop reading it in setup.py")


def _egg_info_requires(text: str) -> tuple[str, ...]:
    """Older setuptools leave Requires-Dist out of an sdist's PKG-INFO; its egg-info/requires.txt has them:
    plain lines, then `[extra]` sections (left out) and `[:marker]` sections (the marker appended)."""
    found, marker = [], ""
    for line in (line.strip() for line in text.splitlines()):
        if line.startswith("["):
            section = line.strip("[]")
            marker = section[1:] if section.startswith(":") else None
        elif line and marker is not None:
            found.append(f"{line}; {marker}" if marker else line)
    return tuple(found)


def read_pkg_info(sdist: Path) -> tuple[ProjectMetadata, tuple[str, ...]]:
    """The metadata in the sdist's top-level PKG-INFO, and its members (relative to the top directory)."""
    with tarfile.open(sdist, "r:gz") as tar:
        names = tar.getnames()
        top = names[0].split("/", 1)[0]
        handle = tar.extractfile(f"{top}/PKG-INFO")
        text = handle.read().decode("utf-8") if handle else ""
        egg_info = [n for n in names if n.endswith(".egg-info/requires.txt") and n.count("/") <= 3]
        handle = tar.extractfile(egg_info[0]) if egg_info else None
        requires_txt = handle.read().decode("utf-8") if handle else ""
    message = email.parser.Parser().parsestr(text)
    requires = tuple(r for r in message.get_all("Requires-Dist") or () if "extra ==" not in r.replace("'", '"')
                     and "extra==" not in r) or _egg_info_requires(requires_txt)
    meta = ProjectMetadata(name=message["Name"], version=message["Version"], requires=requires,
                           python_requires=message.get("Requires-Python"), summary=message.get("Summary"),
                           source=f"PKG-INFO of {sdist.name}")
    members = tuple(sorted(name.split("/", 1)[1] for name in names if "/" in name))
    return meta, members


def normalise(sdist: Path, epoch: int) -> bytes:
    """The sdist's members, unchanged, in a reproducible archive (see the module docstring)."""
    out = io.BytesIO()
    with tarfile.open(sdist, "r:gz") as source, \
            gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=9) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for member in sorted(source.getmembers(), key=lambda m: m.name):
            data = source.extractfile(member).read() if member.isfile() else None
            member.mtime, member.uid, member.gid, member.uname, member.gname = epoch, 0, 0, "", ""
            member.mode = (0o755 if member.isdir() or member.mode & 0o111 else 0o644)
            member.pax_headers = {}
            tar.addfile(member, io.BytesIO(data) if data is not None else None)
    return out.getvalue()


def _cache_dir() -> Path:
    from mlsubmit.local.venvs import mlsubmit_home

    return mlsubmit_home() / "sdists"


def build_sdist_with_frontend(project_dir: Path, *, timeout: float = 600.0) -> FrontendSdist:
    """Build `project_dir`'s sdist with pypa/build in an isolated environment (cached by content hash).

    Raises:
        UsageError: the frontend is missing or the build fails (the frontend's message shortened to its cause),
            or the backend put a file mlsubmit considers a credential into the sdist.
    """
    project_dir = project_dir.resolve()
    files, secrets = project_files(project_dir)
    system = build_system(project_dir)
    backend, isolated = system["build-backend"], not builds_here(system)
    epoch = os.environ.get("SOURCE_DATE_EPOCH", DEFAULT_EPOCH)
    key = hashlib.sha256(f"{tree_digest(files)}\0{epoch}\0{isolated}".encode()).hexdigest()
    cached_dir = _cache_dir() / key[:32]
    found = sorted(cached_dir.glob("*.tar.gz")) if cached_dir.is_dir() else []
    if found:
        meta, members = read_pkg_info(found[0])
        return FrontendSdist(found[0], meta, members, backend, isolated, cached=True)
    try:
        import build  # noqa: F401  (pypa/build: the frontend)
    except ImportError:
        raise UsageError("building this package needs the `build` frontend in mlsubmit's environment",
                         hint="pip install build") from None
    with tempfile.TemporaryDirectory(prefix="mlsubmit-frontend-") as tmp:
        source = Path(tmp) / project_dir.name
        for rel, path in files:
            target = source / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        env["SOURCE_DATE_EPOCH"] = epoch
        out = Path(tmp) / "dist"
        cmd = [sys.executable, "-m", "build", "--sdist", *([] if isolated else ["--no-isolation"]), "--outdir",
               str(out), str(source)]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=tmp,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise UsageError(f"pypa/build did not build {project_dir} within {timeout:.0f} s") from None
        built = sorted(out.glob("*.tar.gz"))
        if done.returncode != 0 or not built:
            raise UsageError(f"{project_dir} does not build with its backend {backend} (pypa/build): "
                             f"{cause(done.stderr + chr(10) + done.stdout)}",
                             hint=missing_file_hint(cause(done.stderr + chr(10) + done.stdout)) or
                             "fix the project so `python -m build --sdist` succeeds there")
        meta, members = read_pkg_info(built[0])
        leaked = [member for member in members if member in secrets]
        if leaked:
            raise UsageError(f"the build backend put {leaked[0]} into the sdist, a file that looks like a credential",
                             hint="exclude it in the backend's configuration")
        ownership.make_folder(cached_dir, "sdist")  # marked: mlsubmit's to prune
        partial = cached_dir / f".{built[0].name}.{os.getpid()}.partial"
        partial.write_bytes(normalise(built[0], int(env["SOURCE_DATE_EPOCH"])))
        os.replace(partial, cached_dir / built[0].name)
    return FrontendSdist(cached_dir / built[0].name, meta, members, backend, isolated, cached=False)
