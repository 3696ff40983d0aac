"""Check a trainer package against the prebuilt image it will run on, before anything is uploaded.

Three checks, all about the image's software rather than mlsubmit's own environment:

- **Requirements**: the package's requirements are resolved together with the image's framework packages by pip's
  own resolver, as the image would take them: `pip install --dry-run --target <scratch> --report -
  --python-version <image's Python> --only-binary=:all: -c <the image's pins> <image packages> <requirements>`
  (`--target`: pip before 24, e.g. the 23.2.1 of `python3 -m venv`, takes `--python-version` only with it),
  reaching the package index pip is configured with (PyPI by default, as the cloud does). A requirement that would
  replace one of the image's framework packages is one line naming both ranges ("requirement tensorboard>=2.21 would
  replace the image's tensorboard: tf-cpu.2-17.py310 carries tensorflow-cpu 2.17.1, which requires
  tensorboard<2.18,>=2.17"), said only when no version satisfies both (mlsubmit.images.conflict): where they overlap,
  the requirement's true cause is looked for (no release for the image's Python, only a source distribution). One
  the image's pins allow (`tensorflow==2.8.0` beside tf-cpu.2-8's tensorflow-cpu 2.8.4) is a note, worded as `train
  --local` and the emulator word it (mlsubmit.images.imported.replaces). `--only-binary` is what pip demands for a
  foreign Python version: a requirement published only as an sdist cannot be resolved that way and is named in a
  warning instead.
- **Removed APIs**: an import of, or attribute chain through, an API the image's Keras, TensorFlow or scikit-learn
  removed (`from sklearn.externals import joblib` on scikit-learn ≥ 0.23), read with `ast` and judged against the
  versions pip chose (mlsubmit.images.removed: the table, with the release notes that say so).
- **Syntax**: every `.py` file is parsed with `ast.parse(..., feature_version=(3, N))` for the image's Python 3.N
  (this catches most newer grammar: `match`, `except*`, parenthesised context managers, walrus, positional-only
  parameters, but not everything: e.g. PEP 701 f-strings and newer standard library names are missed), and, where
  a Python 3.N interpreter exists on this machine (mlsubmit.images.interpreters), compiled by that interpreter, which is
  exact for grammar. The result says which of the two ran.

Offline (the index cannot be reached) the requirements are not checked: one warning says so; the syntax check still
runs. A complete result is cached under $MLSUBMIT_IMAGES/<image>/checks/ (mlsubmit.images.envs) by the sdist's
sha256 and the image's name, so an unchanged package against the same image is checked once; pip's resolution is
also kept by the requirements list alone, so an edited package whose requirements did not change has its files
checked again but costs no pip run (about 9 s on 2 cores for the bundled trainer's list).
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from mlsubmit.cache import ownership
from mlsubmit.errors import UsageError
from mlsubmit.images.catalog import Image
from mlsubmit.images.conflict import conflict, name as _name, requested
from mlsubmit.images.envs import (_OFFLINE, constraints, foreign_python_args, image_packages, image_requirements,
                                  images_home)
from mlsubmit.images.interpreters import find_python

_UNAVAILABLE = re.compile(r"no matching distributions available for your environment:\s*(.+)")
_NO_MATCH = re.compile(r"No matching distribution found for (\S+)")
_OTHER_PYTHON = re.compile(r"Ignored the following versions that require a different python version: (.*)")
_COMPILE = ("import json, sys\n"
            "for path, name in zip(sys.argv[1::2], sys.argv[2::2]):\n"
            "    try:\n"
            "        compile(open(path, 'rb').read(), name, 'exec', dont_inherit=True)\n"
            "    except SyntaxError as err:\n"
            "        print(json.dumps([name, err.lineno, err.msg])); break\n")


@dataclass(frozen=True)
class ImageCheck:
    """What was checked against `image`: pip's choice of the image's packages (name -> version; empty when the
    requirements were not resolved), how syntax was checked, the warnings, and whether it came from the cache."""

    image: str
    resolved: tuple[tuple[str, str], ...]
    syntax: str
    warnings: tuple[str, ...] = ()
    cached: bool = False
    resolution_cached: bool = False  # the files were checked; pip's answer for the same requirements was kept
    replaced: tuple[str, ...] = ()  # notes: a requirement replacing a framework distribution of the image's


# -- syntax -----------------------------------------------------------------------------------------------------
def check_syntax(files: Iterable[tuple[str, Path]], image: Image) -> str:
    """Check every (name in the package, file) for grammar the image's Python rejects; returns how it was checked.

    Raises:
        UsageError: one line naming the file, line and the image's Python.
    """
    files = [(name, Path(path)) for name, path in files if name.endswith(".py")]
    major, minor = (int(part) for part in image.python.split("."))
    here = sys.version_info[:2]
    feature = min((major, minor), here)
    for name, path in files:
        try:
            ast.parse(path.read_bytes(), name, feature_version=feature)
        except SyntaxError as err:
            _syntax_error(name, err.lineno, err.msg, image)
    how = f"ast feature_version={feature}"
    interpreter = find_python(image.python)
    if interpreter is None or not files:
        return how + ("" if interpreter else f" only (no Python {image.python} interpreter on this machine)")
    args = [str(arg) for name, path in files for arg in (path, name)]
    done = subprocess.run([str(interpreter), "-I", "-c", _COMPILE, *args], capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)
    if done.returncode == 0 and done.stdout.strip():
        name, line, message = json.loads(done.stdout.strip().splitlines()[-1])
        _syntax_error(name, line, message, image)
    return f"{how} and compiled by Python {image.python} ({interpreter})"


def _syntax_error(name: str, line: int | None, message: str, image: Image) -> None:
    raise UsageError(f"{name} line {line}: {message}: {image.name} runs Python {image.python}, which cannot parse it",
                     hint=f"write it for Python {image.python}, or pick an image with a newer Python")


# -- requirements -----------------------------------------------------------------------------------------------
def _pip(args: Sequence[str], timeout: float = 300.0) -> subprocess.CompletedProcess:
    from mlsubmit.images.envs import run_pip

    return run_pip(sys.executable, list(args), timeout=timeout)


def _no_release(requirement: str, image: Image, said: str = "", *,
                hint: str = "require a release that supports that Python, or run on an image with a newer Python"
                ) -> UsageError:
    """The one line for a requirement that has no release for the image's Python."""
    return UsageError(f"requirement {requirement} has no release for Python {image.python}, which {image.name} runs"
                      f"{said}", hint=hint)


def _has_release(requirement: str, image: Image, scratch: str) -> tuple[bool | None, str]:
    """Whether `requirement` alone has a release for the image's Python (pip says "no matching distributions" both
    for that and for a conflict with the image's pins: only the first is about the Python), and what pip said it
    ignored. None when the index gave no answer (a timeout on a loaded machine): never read as "it has one", which
    turned a missing release into a false conflict depending on load; asked twice, with pip's own timeouts."""
    for _ in range(2):
        done = _pip(["install", "--dry-run", "--no-deps", *foreign_python_args(image, Path(scratch, "alone")),
                     requirement])
        ignored = _OTHER_PYTHON.search(done.stderr)
        detail = f" (pip ignored: {ignored.group(1)[:160]})" if ignored else ""
        if done.returncode == 0:
            return True, ""
        if any(word in done.stderr for word in _OFFLINE):  # pip says "from versions: none" when it could not ask
            continue
        if _NO_MATCH.search(done.stderr) or "from versions: none" in done.stderr:
            return False, detail
    return None, ""


_BUILDING = ("Preparing metadata", "Getting requirements to build", "Installing build dependencies")


def _only_sdist(requirement: str, image: Image, scratch: str) -> bool | None:
    """For a requirement with no wheel for the image's Python: whether a source distribution of it accepts that
    Python (True: the image's pip would build it at every job start), or whether none does (False: no release for
    that Python at all). pip is asked with source distributions allowed and stopped as soon as it starts to build one
    (it says so before building): what it printed decides, not how long it took. None: the index did not answer."""
    import mlsubmit.local.children as children

    argv = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--no-binary=:all:", "--no-input",
            "--disable-pip-version-check", "--target", str(Path(scratch, "source")), "--ignore-installed",
            "--python-version", f"{image.python}.99", requirement]
    temp = Path(scratch, "source-tmp")  # what the stopped pip leaves goes with the caller's scratch folder
    temp.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PIP_REQUIRE_VIRTUALENV")}
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               stdin=subprocess.DEVNULL, env={**env, "TMPDIR": str(temp)},
                               **children.popen_kwargs())
    said = []
    try:
        for line in process.stdout:
            said.append(line)
            if any(step in line for step in _BUILDING):
                return True
        process.wait(timeout=300)
    finally:
        if process.poll() is None:
            children.kill_group(process)
            process.wait()
        process.stdout.close()
    text = "".join(said)
    if any(word in text for word in _OFFLINE):
        return None
    return False if (_NO_MATCH.search(text) or "from versions: none" in text) else None


def _on_index(requirement: str, scratch: str) -> bool | None:
    """Whether the package index has the project at all: any release of its name, for this machine's Python, wheels
    or sources (False: pip found no version whatever; None: no answer). Tells a misspelt or private name from a
    project that only lacks a release for the image's Python."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        name = Requirement(requirement).name
    except InvalidRequirement:
        return None
    done = _pip(["install", "--dry-run", "--no-deps", "--ignore-installed", "--target", str(Path(scratch, "any")),
                 name])
    if done.returncode == 0:
        return True
    if any(word in done.stderr for word in _OFFLINE):
        return None
    return False if "from versions: none" in done.stderr else True


def _without_wheel(requirement: str, image: Image, scratch: str, ignored: str = "") -> str:
    """The warning for a requirement with no wheel for the image's Python, said before anything is built: its source
    distribution is built at every job start. Raises UsageError when it has no release for that Python at all, or
    when the index has no project of that name."""
    source = _only_sdist(requirement, image, scratch)
    if source is False and not ignored and _on_index(requirement, scratch) is False:
        raise UsageError(f"requirement {requirement} cannot be installed: the package index has no project of that "
                         "name (no release for any Python)", hint="check its spelling, or stage a package that is "
                         "on no index with --extra-packages")
    if source is False:
        raise _no_release(requirement, image, ignored)
    if source is None:
        return (f"{requirement} has no wheel for Python {image.python} on the index, and the index did not say "
                f"whether a source distribution fits: not resolved against {image.name}")
    return (f"{requirement} has no wheel for Python {image.python}, only a source distribution: pip builds it from "
            f"source at every start of the job on {image.name} (a compiled package takes minutes and fails without "
            f"its compilers); require a release with a wheel for Python {image.python}. Not resolved against "
            f"{image.name}")


def _carried_by(requirement: str, carried) -> bool:
    """Whether the image's own distribution of that name satisfies the requirement (pip leaves it as it is)."""
    from packaging.requirements import Requirement

    try:
        parsed = Requirement(requirement)
    except Exception:  # noqa: BLE001 - pip will name a requirement it cannot read
        return False
    return any(_name(item.name) == _name(parsed.name) and not parsed.extras and not parsed.marker
               and parsed.specifier.contains(item.version, prereleases=True) for item in carried)


def declared_in(project: Path | None) -> str:
    """Where a package's requirements are written, for advice that fits its layout: the setup.py beside it (its
    REQUIRED_PACKAGES, its install_requires, or the requirements.txt it reads), its setup.cfg, its pyproject.toml
    (also beside a setup.py that declares none), or its requirements.txt."""
    if project is None:
        return "the package's requirements"
    setup, config, pyproject, listed = (Path(project, name) for name in ("setup.py", "setup.cfg", "pyproject.toml",
                                                                         "requirements.txt"))
    text = setup.read_text(errors="replace") if setup.is_file() else ""
    if "requirements.txt" in text and listed.is_file():
        return "requirements.txt (which setup.py reads)"
    if "REQUIRED_PACKAGES" in text:
        return "setup.py (REQUIRED_PACKAGES)"
    if "install_requires" in text:
        return "setup.py (install_requires)"
    if config.is_file() and "install_requires" in config.read_text(errors="replace"):
        return "setup.cfg ([options] install_requires)"
    if setup.is_file() and not pyproject.is_file():
        return "setup.py (install_requires)"
    if pyproject.is_file():
        return "pyproject.toml ([project] dependencies)"
    return "requirements.txt" if listed.is_file() else "the package's requirements"


def resolve(requirements: Sequence[str], image: Image, *, staged: Iterable[str] = (),
            where: str = "the package's requirements") -> tuple[dict[str, str] | None, list[str]]:
    """({name: version} pip would install for `requirements` on the image, or None when not checked, warnings).
    `staged`: distributions the job stages before the package (never fetched from an index); `where`: where the
    requirements are written (declared_in), for the advice.

    Raises:
        UsageError: a requirement the image cannot take.
    """
    skip = {_name(name) for name in staged}
    requirements = [r for r in requirements if _name(r) not in skip]
    warnings: list[str] = []
    try:
        carried = image_packages(image)
    except UsageError as err:
        if not requirements:  # nothing to resolve: not a warning
            return {}, warnings
        return None, [f"offline: {err.message}, so the requirements ({', '.join(requirements)}) were not resolved "
                      f"against {image.name}'s packages; syntax was checked"]
    requirements = [r for r in requirements if not _carried_by(r, carried)]  # pip keeps what satisfies them
    with tempfile.TemporaryDirectory(prefix="mlsubmit-image-") as tmp:
        pins = Path(tmp, "image-constraints.txt")
        pins.write_text(constraints(image, carried))
        report = Path(tmp, "report.json")
        while requirements:
            args = ["install", "--dry-run", *foreign_python_args(image, tmp), "--report", str(report),
                    "--timeout", "15", "--retries", "1", "-c", str(pins), *requirements]
            try:
                done = _pip(args)
            except subprocess.TimeoutExpired:
                return None, [*warnings, f"pip did not resolve the requirements for {image.name} within 300 s: "
                                          "not checked against the image"]
            if done.returncode == 0:
                answer = json.loads(report.read_text())
                chosen = {_name(item["metadata"]["name"]): item["metadata"]["version"] for item in answer["install"]}
                return {**{c.name: c.version for c in carried}, **chosen}, warnings
            said = f"{done.stdout}\n{done.stderr}"
            if "No module named pip" in said:
                return None, [*warnings, "pip is not installed in mlsubmit's environment: the requirements were "
                                         f"not resolved against {image.name}"]
            names = {_name(r): r for r in requirements}
            unavailable = _UNAVAILABLE.search(said)  # pip 23.1+: names what has no release for that Python at all
            suspects = [names[_name(m)] for m in (unavailable.group(1).split(",") if unavailable else ())
                        if _name(m) in names]
            named = conflict(said, requirements, image.name, carried)  # a real conflict, even with an index down
            if named is None:  # a conflict pip named has ranges that overlap: its cause is elsewhere
                suspects += [r for r in requested(said, requirements) if r not in suspects]
            dropped = False
            for suspect in suspects:
                released, ignored = _has_release(suspect, image, tmp)
                if released is False:
                    warnings.append(_without_wheel(suspect, image, tmp, ignored))
                    requirements.remove(suspect)
                    dropped = True
                    break
                if released is None:  # the cause is unknown: say so, never a guess
                    return None, [*warnings, f"the package index did not answer whether {suspect} has a release for "
                                             f"Python {image.python}: the requirements were not resolved against "
                                             f"{image.name}"]
            if dropped:
                continue
            if named:
                raise UsageError(named, hint=f"change the requirement in {where} to one {image.name} can take, "
                                             "or run on an image that carries it")
            if any(word in said for word in _OFFLINE):
                return None, [*warnings, f"offline: the package index could not be reached, so the requirements "
                                         f"({', '.join(requirements)}) were not resolved against {image.name}'s "
                                         "packages; syntax was checked"]
            missing = _NO_MATCH.search(said)
            other_python = _OTHER_PYTHON.search(said)
            if missing and other_python and _name(missing.group(1)) in names:
                raise _no_release(missing.group(1), image, f" (pip ignored: {other_python.group(1)[:160]})",
                                  hint="require a release that supports that Python")
            if missing and _name(missing.group(1)) in names:
                lacking = names[_name(missing.group(1))]
                warnings.append(_without_wheel(lacking, image, tmp))
                requirements.remove(lacking)
                continue
            tail = " | ".join(line.strip() for line in said.splitlines() if line.startswith("ERROR"))[-300:]
            why = tail or f"exit code {done.returncode}"
            return None, [*warnings, f"pip could not resolve the requirements for {image.name} ({why}): not "
                                     "checked against the image"]
    return {c.name: c.version for c in carried}, warnings


# -- the check, cached ------------------------------------------------------------------------------------------
def _cache_path(sha256: str, image: Image) -> Path:
    return images_home() / image.key / "checks" / f"{sha256[:32]}.json"


def _resolution_path(requirements: Sequence[str], staged: Iterable[str], image: Image) -> Path:
    key = hashlib.sha256(json.dumps([sorted(requirements), sorted(_name(n) for n in staged)]).encode()).hexdigest()
    return images_home() / image.key / "checks" / f"requirements-{key[:32]}.json"


def _keep(path: Path, content: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(content))
    ownership.keep(partial, path, "image-check")  # in place, and listed as mlsubmit's


def check(requirements: Sequence[str], files: Iterable[tuple[str, Path]], sha256: str, image: Image, *,
          staged: Iterable[str] = (), project: Path | None = None) -> ImageCheck:
    """Check a package (its requirements, its (name, file) pairs, the sha256 of its sdist) against `image`;
    `staged`: the distributions staged before it (see `resolve`).

    Raises:
        UsageError: a requirement the image cannot take, or syntax its Python cannot parse (one line).
    """
    cache = _cache_path(sha256, image)
    if cache.exists():
        saved = json.loads(cache.read_text())
        resolved = tuple(map(tuple, saved["resolved"]))
        return ImageCheck(image.name, resolved, saved["syntax"], cached=True,
                          replaced=_replacing(requirements, dict(resolved), image))
    staged, files = tuple(staged), list(files)
    syntax = check_syntax(files, image)
    kept = _resolution_path(requirements, staged, image)
    reused = kept.exists()
    if reused:
        resolved, warnings = dict(json.loads(kept.read_text())), []
    else:
        resolved, warnings = resolve(requirements, image, staged=staged, where=declared_in(project))
    _check_removed(files, resolved, image)
    result = ImageCheck(image.name, tuple(sorted((resolved or {}).items())), syntax, tuple(warnings),
                        resolution_cached=reused, replaced=_replacing(requirements, resolved, image))
    if resolved is not None and not warnings:  # only a complete check is remembered
        if not reused:
            _keep(kept, result.resolved)
        _keep(cache, {"resolved": result.resolved, "syntax": syntax})
    return result


def _replacing(requirements: Sequence[str], resolved: dict[str, str] | None, image: Image) -> tuple[str, ...]:
    """The notes of the requirements whose version pip chose replaces a framework distribution the image provides
    (mlsubmit.images.imported.planned: the wording `train --local` and the emulator use); the image's environment is
    asked what it imports only where it is built already (numpy, protobuf: versions its pip chose)."""
    from mlsubmit.images.envs import built_python
    from mlsubmit.images.imported import names_framework, planned, provided

    if not resolved or not names_framework(requirements):
        return ()
    try:
        carried = image_packages(image)
    except UsageError:  # offline and never looked up: nothing to compare with
        return ()
    return tuple(planned(requirements, resolved, provided(carried, built_python(image, carried))))


def _check_removed(files: Sequence[tuple[str, Path]], resolved: dict[str, str] | None, image: Image) -> None:
    """An API the image's Keras, TensorFlow or scikit-learn no longer has, used by a file (mlsubmit.images.removed),
    judged against what pip chose for the job, or the image's own versions when pip was not asked.

    Raises:
        UsageError: one line naming the file, line, API, the image's version and what replaces it."""
    from mlsubmit.images.removed import find_removed

    versions = resolved
    if versions is None:
        try:
            versions = {c.name: c.version for c in image_packages(image)}
        except UsageError:  # offline before the image was ever looked up: nothing to judge against
            return
    use = find_removed(files, versions)
    if use is not None:
        raise UsageError(use.message(image.name), hint=f"change the code, or run it on an image with "
                                                       f"{use.removed.distribution} older than {use.removed.release}")


def describe(result: ImageCheck, image: Image) -> str:
    """One line for the user: what ran against which image."""
    versions = dict(result.resolved)
    carried = ", ".join(f"{name} {versions[name]}" for name in (_name(r) for r in image_requirements(image))
                        if name in versions)
    said = f"resolved by pip with {carried}" if versions else "requirements not resolved"
    cached = (" (cached for this sha256 and image)" if result.cached else
              " (pip's answer kept for the same requirements and image)" if result.resolution_cached else "")
    return f"image {image.name} (Python {image.python}): {said}; syntax: {result.syntax}{cached}"


def check_plan(spec, planned, say: Callable[[str], None] = lambda text: None, *, api: str = "vertex",
               staged: Iterable[str] = ()) -> ImageCheck | None:
    """The pre-upload hook: the planned package (mlsubmit.packaging.DryRun) against the job's image (the refusal of
    an image the service would not run, mlsubmit.images.choose.served, comes first, from the caller).

    Does nothing more for the user's own container or an image the table does not know (said). Warnings and the
    result go to `say`.

    Raises:
        UsageError: a requirement the image cannot take, syntax its Python cannot parse.
    """
    from mlsubmit.images import choose

    chief = choose.choose(spec, api=api)
    say(f"image: {chief.describe()}")
    for note in choose.python_notes(spec, api=api):
        say(f"warning: {note}")
    if chief.image is None:
        if chief.runs_package:
            say(f"warning: mlsubmit does not know {chief.uri}: the package is not checked against its software; "
                "its command runs `python -m pip install` there, so it needs Python 3 and pip")
        return None
    plan = planned.plan
    result = check(plan.metadata.requires, [(f.path, f.source) for f in plan.files], planned.sha256, chief.image,
                   staged=staged, project=plan.package_dir.parent)
    for warning in result.warnings:
        say(f"warning: {warning}")
    say(describe(result, chief.image))
    for note in result.replaced:
        say(f"note: {note}")
    return result
