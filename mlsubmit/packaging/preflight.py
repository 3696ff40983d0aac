"""Install an sdist into a fresh virtual environment and check, without running it, that its module is there.

This is how the cloud installs a trainer package (`pip install <sdist>` on an image that already carries
TensorFlow), done locally so a package that cannot install fails before a job is queued:

- the fresh venv is made by the Python of a base environment (`BaseEnv`: by default the job's image environment,
  mlsubmit.images.envs, so the image's Python and packages decide; mlsubmit's own environment when image
  environments are off, MLSUBMIT_IMAGE_ENV=0) and sees that environment's packages through a `.pth` bridge;
- `pip install --no-deps --no-index --no-build-isolation --ignore-installed <sdist>`: no network, and
  setuptools comes from the base environment instead of being fetched (the cloud, online, builds in
  isolation with setuptools from the index). An sdist whose backend is not setuptools (hatchling, flit, …),
  or one that mlsubmit's own setuptools cannot build a wheel of alone (before 70.1, without `wheel`), is built
  in isolation as the cloud does, its backend fetched from your index;
- the module must be in the installed package (found without importing anything), then the package's declared
  requirements that the environment does not already satisfy are installed from your index with your pip
  configuration (`requirements.py`): what the cloud's pip would add to its image — before anything of the
  package is looked at further;
- last, `module_check`: the module and its packages' `__init__`s are compiled by the venv's Python and their
  module-level imports looked up. Nothing of the package runs: a trainer without an argument parser would run
  its whole job under `--help`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mlsubmit.launcher.replica import BUILD_DEPS_FAILED
from mlsubmit.local import children  # pip and the checks run as children that die with us and can be stopped
from mlsubmit.errors import UsageError
from mlsubmit.packaging.frontend import missing_file_hint
from mlsubmit.packaging.module_check import check_module, find_module, inspect_module, module_missing
from mlsubmit.packaging.requirements import install_requirements, needs_build_isolation
from mlsubmit.packaging.sdist import Sdist

__all__ = ["BaseEnv", "PreflightResult", "base_env", "check_module", "checked_once", "create_venv", "default_module",
           "find_module", "install_into_venv", "install_package", "module_missing", "own_env", "preflight"]

_BRIDGE = "_mlsubmit_tool_env.pth"
_DESCRIBE = ("import json, os, site, sys\n"
             "dirs = site.getsitepackages() if hasattr(site, 'getsitepackages') else []\n"
             "print(json.dumps([os.path.realpath(sys.executable), sys.version.split()[0], dirs]))\n")


@dataclass(frozen=True)
class BaseEnv:
    """The environment a pre-flight's fresh venv is made from and sees: its interpreter and what to call it.

    `python` may be a venv's (an image environment) or a plain interpreter; `label` says which in the output
    ("image tf-cpu.2-17.py310's environment", "mlsubmit's own environment")."""

    python: Path
    label: str
    image: object = None  # the mlsubmit.images.catalog.Image whose environment `python` is, if one is


def own_env() -> BaseEnv:
    """mlsubmit's own interpreter and packages (image environments off)."""
    return BaseEnv(Path(sys.executable), "mlsubmit's own environment")


def base_env(image=None, say: Callable[[str], None] = lambda text: None) -> BaseEnv:
    """The default base of a pre-flight: the environment of `image` (a mlsubmit.images.catalog.Image; None: the
    image a job with default flags runs), built once by mlsubmit.images.envs, when image environments are on
    and the table knows that image (TensorFlow, PyTorch, scikit-learn, XGBoost); otherwise mlsubmit's own
    environment.

    Where the image's environment cannot be had (offline before it was built; a pip that cannot resolve for it),
    mlsubmit's own environment is used and its label says why, so the pre-flight's output line says it.
    """
    from mlsubmit.images import envs as image_env

    if not image_env.enabled():
        return own_env()
    if image is None:
        from mlsubmit.images import choose
        from mlsubmit.jobspec.spec import JobSpec

        image = choose.job_image(JobSpec())
    if image is None:
        return own_env()
    try:
        python, _ = image_env.image_python(image, say)
    except UsageError as err:  # said where the result is shown, never silently
        return BaseEnv(own_env().python, f"mlsubmit's own environment, not image {image.name}'s ({err.message})")
    return BaseEnv(python, f"image {image.name}'s environment", image)


@dataclass(frozen=True)
class PreflightResult:
    """What was checked of the module (in words, see module_check.ModuleCheck.describe), where it was found, on
    which environment, and how long it all took."""

    module: str
    check: str
    origin: str
    seconds: float
    installed: tuple[str, ...] = ()  # requirements the environment lacked, installed from the index
    cached: bool = False  # this same content passed before (`checked_once`): nothing was installed now
    environment: str = "mlsubmit's own environment"  # BaseEnv.label


def _clean_env(cwd: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PIP_") and k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
    env.update(PYTHONNOUSERSITE="1", PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1",
               PIP_NO_INPUT="1", PWD=str(cwd))
    return env


def _index_env(cwd: Path) -> dict[str, str]:
    """For pip steps that use the index: the user's pip configuration applies, nothing else of the shell's."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
    env.update(PYTHONNOUSERSITE="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", PWD=str(cwd))
    return env


def _tail(text: str, lines: int = 6) -> str:
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(kept[-lines:]) or "(no output)"


def build_cause(output: str) -> str:
    """What made a build or an install fail, one line (mlsubmit.images.pip_errors: the build's own error lines, else
    pip's ERROR lines, else the last lines)."""
    from mlsubmit.images.pip_errors import pip_reason

    return pip_reason(output)


def _venv_python(venv_dir: Path) -> Path:
    return venv_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def create_venv(venv_dir: str | os.PathLike, base: BaseEnv | None = None) -> Path:
    """A new venv at `venv_dir` made by `base`'s interpreter (default: mlsubmit's own) that sees `base`'s
    packages (pip, setuptools, TensorFlow, …) through a `.pth` bridge to its site-packages; returns its python."""
    base, venv_dir = base or own_env(), Path(venv_dir)
    described = children.run([str(base.python), "-c", _DESCRIBE], capture_output=True, text=True, timeout=120,
                             stdin=subprocess.DEVNULL, env=_clean_env(venv_dir.parent))
    if described.returncode != 0:
        raise UsageError(f"the interpreter of {base.label} ({base.python}) does not run: "
                         f"{_tail(described.stderr)}")
    interpreter, _, site_dirs = json.loads(described.stdout.strip().splitlines()[-1])
    made = children.run([interpreter, "-m", "venv", "--without-pip", str(venv_dir)], capture_output=True,
                        text=True, timeout=300, stdin=subprocess.DEVNULL, env=_clean_env(venv_dir.parent))
    if made.returncode != 0:
        raise UsageError(f"no venv could be made with {interpreter}: {_tail(made.stderr)}")
    python = _venv_python(venv_dir)
    purelib = children.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                           capture_output=True, text=True, check=True).stdout.strip()
    lines = [f"import site; site.addsitedir({path!r})\n" for path in site_dirs]
    Path(purelib, _BRIDGE).write_text("".join(lines))
    return python


def install_into_venv(sdist: Sdist | str | os.PathLike, venv_dir: str | os.PathLike, *,
                      timeout: float = 300.0) -> Path:
    """Install the sdist (or wheel) and its missing requirements into a venv at `venv_dir`; returns its python.

    The local runner and the emulator use this to run a job from the package exactly as staged.

    Raises:
        UsageError: see `install_package`.
    """
    return install_package(sdist, venv_dir, timeout=timeout)[0]


def install_package(sdist: Sdist | str | os.PathLike, venv_dir: str | os.PathLike, *,
                    timeout: float = 300.0, requirements: bool = True,
                    base: BaseEnv | None = None) -> tuple[Path, tuple[str, ...]]:
    """Install the sdist (or wheel) and its missing requirements into a venv at `venv_dir`, created if missing.

    Returns the venv's python and the requirements that had to be installed. A new venv is made from `base`
    (default: mlsubmit's own environment).

    Raises:
        UsageError: pip could not install the package (carrying pip's last lines), a requirement cannot be
            installed, or setuptools is missing.
    """
    path = sdist.path if isinstance(sdist, Sdist) else Path(sdist)
    venv_dir = Path(venv_dir)
    python = _venv_python(venv_dir)
    if not python.exists():
        python = create_venv(venv_dir, base)
    # offline with the base's setuptools when it is mlsubmit's own and can build a wheel alone; an image's
    # environment need not carry setuptools' `wheel`: there pip builds in isolation from the index, as the cloud's
    # pip does
    on_image = base is not None and base.python != own_env().python
    isolated = needs_build_isolation(path) or on_image
    offline = [] if isolated else ["--no-index", "--no-build-isolation"]
    cmd = [str(python), "-m", "pip", "install", "--no-deps", *offline, "--ignore-installed", "--no-cache-dir",
           "--no-input", str(path)]
    env = _clean_env(venv_dir) if not isolated else _index_env(venv_dir)
    try:
        with tempfile.TemporaryDirectory(prefix="mlsubmit-pip-") as scratch:  # what a killed pip leaves goes too
            done = children.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=venv_dir,
                                env={**env, "TMPDIR": scratch})
    except subprocess.TimeoutExpired:
        raise UsageError(f"pip did not install {path.name} within {timeout:.0f} s") from None
    if done.returncode != 0:
        if "No module named setuptools" in (done.stderr or ""):
            raise UsageError(f"{path.name} does not install: installing it offline needs setuptools in "
                             f"{(base or own_env()).label}", hint="pip install setuptools, or pass --skip-preflight")
        said = build_cause(done.stderr or done.stdout)
        if isolated and re.search(BUILD_DEPS_FAILED, done.stderr + done.stdout, re.I):
            raise UsageError(f"{path.name} does not install: pip could not fetch its build requirements from your "
                             f"package index ({said})",
                             hint="give pip an index it can reach (pip.conf, PIP_INDEX_URL)" + (
                                 "" if on_image else
                                 ", or pip install 'setuptools>=70.1' beside mlsubmit to build offline")) from None
        raise UsageError(f"{path.name} does not install (pip exit code {done.returncode}): {said}",
                         hint=missing_file_hint(said) or
                         "fix the package or setup.py; --skip-preflight skips this check") from None
    if not requirements:
        return python, ()
    installed = install_requirements(python, path, cwd=venv_dir, env=_index_env(venv_dir), timeout=timeout)
    return python, tuple(installed)


def default_module(sdist: Sdist) -> str:
    """`<package>.task` (the Cloud ML convention) when the package has task.py, else the package itself."""
    return f"{sdist.package}.task" if f"{sdist.package}/task.py" in sdist.files else sdist.package


def preflight(sdist: Sdist, module: str | None = None, *, timeout: float = 120.0,
              extra_packages: tuple[Path, ...] = (), base: BaseEnv | None = None) -> PreflightResult:
    """Install `sdist` (after `extra_packages`, the job's other packages) into a fresh temporary venv made from
    `base` (default: mlsubmit's own environment; `base_env()` gives the image's), its declared requirements
    before anything of it is looked at, then check the module the job will run without running it
    (module_check).

    Raises:
        UsageError: the package does not install, the module is not in it, does not compile on the base's
            Python, or imports what neither the package, its requirements nor the base environment provide.
    """
    module = module or default_module(sdist)
    base = base or own_env()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mlsubmit-preflight-") as tmp:
        work = Path(tmp)
        venv_dir, installed = work / "venv", ()
        from mlsubmit.packaging.runtime_dist import build_runtime, sdist_needs_runtime

        if sdist_needs_runtime(sdist.path):  # installed first, as the job's package URIs list it
            extra_packages = (build_runtime(work).path, *extra_packages)
        for extra in extra_packages:
            installed += install_package(extra, venv_dir, base=base)[1]
        python, _ = install_package(sdist, venv_dir, requirements=False, base=base)
        # the module first (found without importing): a --module-name that is not in the package fails before
        # anything is fetched
        find_module(python, venv_dir, module, cwd=work, timeout=timeout, package=sdist.package)
        if base.image is not None:  # what the image's table lists and the package imports (mlsubmit.images.listed)
            from mlsubmit.images.job_envs import see_listed

            installed += tuple(item.requirement for item in see_listed(base.image, base.python, python,
                                                                       [*extra_packages, sdist.path]))
        installed += tuple(install_requirements(python, sdist.path, cwd=venv_dir, env=_index_env(venv_dir)))
        checked = inspect_module(python, venv_dir, module, cwd=work, timeout=timeout, package=sdist.package)
    return PreflightResult(module, checked.describe(), checked.origin, time.perf_counter() - started, installed,
                           environment=f"{base.label} (Python {checked.python})")


def _cache_key(sdist: Sdist, module: str, extra_packages: tuple, base: BaseEnv) -> str:
    """What a pre-flight's outcome depends on: the sdist's bytes, the module, the extra packages' bytes,
    mlsubmit-runtime's sdist when the package uses it, the base environment (its interpreter's path: an image
    environment's path carries the hash of its contents) and the mlsubmit that runs it."""
    from mlsubmit import __version__
    from mlsubmit.packaging.runtime_dist import runtime_plan, sdist_needs_runtime
    from mlsubmit.packaging.sdist import archive_digest, file_sha256

    parts = [sdist.sha256, module, str(base.python), __version__, *(file_sha256(Path(p)) for p in extra_packages)]
    if sdist_needs_runtime(sdist.path):
        parts.append(archive_digest(runtime_plan())[0])
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def checked_once(sdist: Sdist, module: str | None = None, *, timeout: float = 120.0,
                 extra_packages: tuple = (), base: BaseEnv | None = None) -> PreflightResult:
    """`preflight`, once per content: a passed check is kept under $MLSUBMIT_HOME/preflight/ by `_cache_key`, so
    packaging an unchanged package again installs nothing (the result says `cached`). A failure is never kept.
    `base`: the environment it runs on (default: `base_env()`, the default image's when image environments are on)."""
    from mlsubmit.cache import ownership
    from mlsubmit.local.venvs import mlsubmit_home

    module = module or default_module(sdist)
    base = base or base_env()
    kept = mlsubmit_home() / "preflight" / f"{_cache_key(sdist, module, tuple(extra_packages), base)}.json"
    try:
        saved = json.loads(kept.read_text(encoding="utf-8"))
        return PreflightResult(saved["module"], saved["check"], saved["origin"], 0.0, tuple(saved["installed"]),
                               cached=True, environment=saved["environment"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    result = preflight(sdist, module, timeout=timeout, extra_packages=extra_packages, base=base)
    kept.parent.mkdir(parents=True, exist_ok=True)
    partial = kept.with_name(f".{kept.name}.{os.getpid()}")
    partial.write_text(json.dumps({"module": result.module, "check": result.check, "origin": result.origin,
                                   "installed": list(result.installed), "environment": result.environment}),
                       encoding="utf-8")
    ownership.keep(partial, kept, "preflight")  # in place, and listed as mlsubmit's
    return result
