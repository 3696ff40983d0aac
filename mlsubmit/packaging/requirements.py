"""A package's declared requirements in the venv it was installed into, as the cloud's `pip install` adds them.

The venv sees mlsubmit's environment (TensorFlow and friends, like the training image), so most requirements
are satisfied already: those are checked with the installed metadata and cost nothing. Only the missing ones
go to pip, with your pip configuration (index, find-links, certificates); one that cannot be resolved is one
line naming it and pip's reason.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

from mlsubmit.errors import UsageError
from mlsubmit.images.sdists import distribution_name, sdist_file as _sdist_file  # noqa: F401 - re-exported

# Run by an environment's python: the requirements of distributions (argv[1], a JSON list) that neither they nor the
# environment satisfy. A requirement with extras counts as missing (pip installs what its extras add). Python 3.7
# images have importlib_metadata, not .metadata.
_MISSING = """\
import json, re, sys
try:
    import importlib.metadata as md
except ImportError:
    import importlib_metadata as md
try:
    from packaging.requirements import Requirement
except ImportError:
    from pip._vendor.packaging.requirements import Requirement
canonical = lambda name: re.sub(r"[-_.]+", "-", name).lower()
names = json.loads(sys.argv[1])
own = {canonical(name) for name in names}
missing = set()
for name in names:
    for text in md.distribution(name).requires or []:
        req = Requirement(text)
        if canonical(req.name) in own or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue
        try:
            version = md.version(req.name)
        except md.PackageNotFoundError:
            missing.add(text)
            continue
        if req.extras or (req.specifier and not req.specifier.contains(version, prereleases=True)):
            missing.add(text)
print(json.dumps(sorted(missing)))
"""
_SETUPTOOLS_ONLY = ("setuptools", "wheel")


def builds_here(build_system: dict) -> bool:
    """Whether mlsubmit's own environment can build with this `[build-system]` table: a setuptools backend
    whose declared requirements (setuptools, wheel) are installed here in versions they accept."""
    import importlib.metadata

    from packaging.requirements import Requirement

    backend = str(build_system.get("build-backend", "setuptools.build_meta"))
    if not backend.startswith("setuptools."):
        return False
    for text in build_system.get("requires", ["setuptools"]):
        requirement = Requirement(text)
        if requirement.name.lower() not in _SETUPTOOLS_ONLY:
            return False
        try:
            version = importlib.metadata.version(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            return False
        if not requirement.specifier.contains(version, prereleases=True):
            return False
    return True


def needs_build_isolation(path: Path) -> bool:
    """Whether installing `path` needs a backend mlsubmit's environment lacks (see `builds_here`)."""
    if not path.name.endswith((".tar.gz", ".tgz")):
        return False
    text = _sdist_file(path, "pyproject.toml")
    if text is None:
        return False
    import tomllib

    return not builds_here(tomllib.loads(text).get("build-system", {}))


def pip_error(output: str) -> str:
    """pip's reason in one line: its first ERROR line (with the next when it explains the first)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line.removeprefix("ERROR:").strip() for line in lines if line.startswith("ERROR:")]
    if errors:
        return "; ".join(errors[:2])
    return lines[-1] if lines else "(no output)"


def missing_requirements(python: Path, distributions: list[str], *, cwd: Path | None = None,
                         env: dict[str, str] | None = None) -> list[str]:
    """The requirements of the installed `distributions` that `python`'s environment does not satisfy (with env
    None, run isolated: -I, no user site or PYTHON* variables)."""
    done = subprocess.run([str(python), *(["-I"] if env is None else []), "-c", _MISSING, json.dumps(distributions)],
                          capture_output=True, text=True, cwd=cwd, env=env, stdin=subprocess.DEVNULL, timeout=120)
    if done.returncode != 0:
        raise UsageError(f"cannot read the requirements of {', '.join(distributions)} after installing them: "
                         f"{(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def install_requirements(python: Path, package: Path, *, cwd: Path, env: dict[str, str],
                         timeout: float = 600.0) -> list[str]:
    """Install the requirements of the installed `package` that the venv lacks; returns those installed.

    Raises:
        UsageError: a requirement cannot be resolved or installed (pip's reason, one line).
    """
    distribution = distribution_name(package)
    missing = missing_requirements(python, [distribution], cwd=cwd, env=env)
    if not missing:
        return []
    cmd = [str(python), "-m", "pip", "install", "--no-input", *missing]
    from mlsubmit.local import children

    try:
        with tempfile.TemporaryDirectory(prefix="mlsubmit-pip-") as scratch:  # what a killed pip leaves goes too
            done = children.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                                env={**env, "TMPDIR": scratch}, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise UsageError(f"pip did not install {', '.join(missing)} within {timeout:.0f} s") from None
    if done.returncode != 0:
        raise UsageError(f"the requirements of {distribution} cannot be installed ({', '.join(missing)}): "
                         f"{pip_error(done.stderr + chr(10) + done.stdout)}",
                         hint="fix the requirement, or make it available to pip (index, --find-links)")
    return missing
