"""A package's declared requirements in the venv it was installed into, as the cloud's `pip install` adds them.

The venv sees mlsubmit's environment (TensorFlow and friends, like the training image), so most requirements
are satisfied already: those are checked with the installed metadata and cost nothing. Only the missing ones
go to pip, with your pip configuration (index, find-links, certificates); one that cannot be resolved is one
line naming it and pip's reason.
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from mlsubmit.errors import UsageError
from mlsubmit.images.missing import missing_requirements
from mlsubmit.images.sdists import distribution_name, sdist_file as _sdist_file  # noqa: F401 - re-exported

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


def builds_wheels_here() -> bool:
    """Whether mlsubmit's own setuptools can build a wheel with nothing fetched: 70.1 and later can, older ones only
    beside the `wheel` package (a Python 3.10 venv comes with setuptools 65.5 and no wheel: "invalid command
    'bdist_wheel'"). The rule is the launcher's, which decides the same on a cluster's nodes."""
    import importlib.metadata

    from mlsubmit.launcher.replica import builds_without_isolation

    def installed(name):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return None

    return builds_without_isolation(installed("setuptools"), installed("wheel") is not None)


def needs_build_isolation(path: Path) -> bool:
    """Whether installing `path` needs a backend mlsubmit's environment lacks (see `builds_here`), or a wheel build
    its setuptools cannot do alone (`builds_wheels_here`)."""
    if not path.name.endswith((".tar.gz", ".tgz")):
        return False
    if not builds_wheels_here():
        return True
    text = _sdist_file(path, "pyproject.toml")
    if text is None:
        return False
    from mlsubmit.packaging.toml import loads

    return not builds_here(loads(text).get("build-system", {}))


def pip_error(output: str) -> str:
    """pip's reason in one line: its first ERROR line (with the next when it explains the first)."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line.removeprefix("ERROR:").strip() for line in lines if line.startswith("ERROR:")]
    if errors:
        return "; ".join(errors[:2])
    return lines[-1] if lines else "(no output)"


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
