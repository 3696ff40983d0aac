"""Install an sdist into a fresh virtual environment offline and check its module starts there.

This is how the cloud installs a trainer package (`pip install <sdist>` on an image that already carries
TensorFlow), done locally so a package that cannot install fails before a job is queued:

- the venv sees mlsubmit's own environment (TensorFlow, Keras, pip, setuptools): `--system-site-packages`,
  plus a `.pth` bridge to this interpreter's site-packages when mlsubmit itself runs inside a venv (a venv's
  "system" site-packages is the base interpreter's, not the venv's);
- `pip install --no-deps --no-index --no-build-isolation --ignore-installed <sdist>`: no network, and
  setuptools comes from mlsubmit's environment instead of being fetched (the cloud, online, builds in
  isolation with setuptools from the index). An sdist whose backend is not setuptools (hatchling, flit, …)
  is built in isolation as the cloud does, its backend fetched from your index;
- then the package's declared requirements that the environment does not already satisfy are installed from
  your index with your pip configuration (`requirements.py`): what the cloud's pip would add to its image;
- the module must be found inside the new venv (mlsubmit may be installed in editable mode, which would make
  the working tree importable), then `python -m <module> --help` runs; if that fails or hangs, an import of
  the module decides.
"""

from __future__ import annotations

import importlib.util
import hashlib
import json
import os
import site
import subprocess
import sys
import tempfile
import time
import venv
from dataclasses import dataclass
from pathlib import Path

from mlsubmit.local import children  # pip and the checks run as children that die with us and can be stopped
from mlsubmit.errors import UsageError
from mlsubmit.packaging.requirements import install_requirements, needs_build_isolation
from mlsubmit.packaging.sdist import Sdist

_BRIDGE = "_mlsubmit_tool_env.pth"
_FIND_MODULE = ("import importlib.util, sys\n"
                "try:\n"
                "    spec = importlib.util.find_spec(sys.argv[1])\n"
                "except ModuleNotFoundError as err:\n"
                "    if not sys.argv[1].startswith(str(err.name)):\n"
                "        raise\n"
                "    spec = None  # a parent package is missing: the module is not there\n"
                "print(spec.origin if spec and spec.origin else '')\n")


@dataclass(frozen=True)
class PreflightResult:
    """How the module was checked (`--help` or `import`), where it was found, and how long it all took."""

    module: str
    check: str
    origin: str
    seconds: float
    installed: tuple[str, ...] = ()  # requirements the environment lacked, installed from the index
    cached: bool = False  # this same content passed before (`checked_once`): nothing was installed now


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


def _python_error(stderr: str) -> str:
    """A traceback as one line: the exception, and where it was raised inside site-packages."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    frames = [line for line in lines if line.startswith('File "')]
    if not frames:
        return _tail(stderr)
    where = frames[-1].split('"')[1].split("site-packages/")[-1]
    number = frames[-1].split(", line ")[-1].split(",")[0]
    return f"{lines[-1]} ({where}, line {number})"


def _venv_python(venv_dir: Path) -> Path:
    return venv_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def create_venv(venv_dir: Path) -> Path:
    """A new venv at `venv_dir` that sees mlsubmit's environment; returns its python."""
    has_pip = importlib.util.find_spec("pip") is not None
    venv.EnvBuilder(system_site_packages=True, with_pip=not has_pip, symlinks=os.name != "nt").create(venv_dir)
    python = _venv_python(venv_dir)
    if sys.prefix != sys.base_prefix:  # mlsubmit runs in a venv: bridge to its site-packages
        purelib = children.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        lines = [f"import site; site.addsitedir({path!r})\n" for path in site.getsitepackages()]
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
                    timeout: float = 300.0, requirements: bool = True) -> tuple[Path, tuple[str, ...]]:
    """Install the sdist (or wheel) and its missing requirements into a venv at `venv_dir`, created if missing.

    Returns the venv's python and the requirements that had to be installed.

    Raises:
        UsageError: pip could not install the package (carrying pip's last lines), a requirement cannot be
            installed, or setuptools is missing.
    """
    path = sdist.path if isinstance(sdist, Sdist) else Path(sdist)
    venv_dir = Path(venv_dir)
    if importlib.util.find_spec("setuptools") is None:
        raise UsageError("installing the package offline needs setuptools in mlsubmit's environment",
                         hint="pip install setuptools, or pass --skip-preflight")
    python = _venv_python(venv_dir)
    if not python.exists():
        python = create_venv(venv_dir)
    isolated = needs_build_isolation(path)
    offline = [] if isolated else ["--no-index", "--no-build-isolation"]
    cmd = [str(python), "-m", "pip", "install", "--no-deps", *offline, "--ignore-installed", "--no-cache-dir",
           "--no-input", str(path)]
    env = _clean_env(venv_dir) if not isolated else _index_env(venv_dir)
    try:
        done = children.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=venv_dir, env=env)
    except subprocess.TimeoutExpired:
        raise UsageError(f"pip did not install {path.name} within {timeout:.0f} s") from None
    if done.returncode != 0:
        raise UsageError(f"{path.name} does not install (pip exit code {done.returncode}): "
                         f"{_tail(done.stderr or done.stdout)}",
                         hint="fix the package or setup.py; --skip-preflight skips this check") from None
    if not requirements:
        return python, ()
    installed = install_requirements(python, path, cwd=venv_dir, env=_index_env(venv_dir), timeout=timeout)
    return python, tuple(installed)


def _origin(python: Path, module: str, cwd: Path, timeout: float) -> str:
    done = _runs(python, ["-c", _FIND_MODULE, module], cwd, timeout)
    if done is None or done.returncode != 0:
        said = f"no answer within {timeout:.0f} s" if done is None else _python_error(done.stderr)
        raise UsageError(f"importing the package that holds {module} fails after installing it: {said}",
                         hint="--skip-preflight skips this check")
    return done.stdout.strip()


def _runs(python: Path, args: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess | None:
    try:
        return children.run([str(python), *args], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                              env=_clean_env(cwd), stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None


def default_module(sdist: Sdist) -> str:
    """`<package>.task` (the Cloud ML convention) when the package has task.py, else the package itself."""
    return f"{sdist.package}.task" if f"{sdist.package}/task.py" in sdist.files else sdist.package


def module_missing(module: str, package: str | None) -> UsageError:
    """The one message for a module the job would run that the package does not have."""
    holding = f" (it holds the package {package!r})" if package else ""
    return UsageError(f"module {module!r} is not in the package{holding}",
                      hint=f"pass --module-name with one of its modules, e.g. {package or '<package>'}.task")


def find_module(python: Path, venv_dir: Path, module: str, *, cwd: Path, timeout: float = 120.0,
                package: str | None = None) -> str:
    """The file of `module` in the venv (not importing it).

    Raises:
        UsageError: the module is not in the installed package, or something outside the venv shadows it.
    """
    origin = _origin(python, module, cwd, timeout)
    if not origin:
        raise module_missing(module, package)
    if not Path(origin).resolve().is_relative_to(venv_dir.resolve()):
        raise UsageError(f"{module} was imported from {origin}, not from the package installed in the fresh venv",
                         hint="a module of the same name shadows it in mlsubmit's environment")
    return origin


def check_module(python: Path, venv_dir: Path, module: str, *, cwd: Path, timeout: float = 120.0,
                 package: str | None = None) -> tuple[str, str]:
    """Check that `module` comes from `venv_dir` and starts: returns (check used, module file).

    Raises:
        UsageError: the module is missing, shadowed from outside the venv, or does not import.
    """
    origin = find_module(python, venv_dir, module, cwd=cwd, timeout=timeout, package=package)
    helped = _runs(python, ["-m", module, "--help"], cwd, timeout)
    if helped is not None and helped.returncode == 0:
        return "--help", origin
    imported = _runs(python, ["-c", f"import {module}"], cwd, timeout)
    if imported is None or imported.returncode != 0:
        said = "timed out" if imported is None else _python_error(imported.stderr)
        raise UsageError(f"{module} does not import from the installed package: {said}",
                         hint="fix the module; --skip-preflight skips this check")
    return "import", origin


def preflight(sdist: Sdist, module: str | None = None, *, timeout: float = 120.0,
              extra_packages: tuple[Path, ...] = ()) -> PreflightResult:
    """Install `sdist` (after `extra_packages`, the job's other packages) with its missing requirements into a
    fresh temporary venv and check `python -m <module> --help` there: the module the job will run.

    If `--help` fails or does not finish within `timeout` (a module without an argument parser may start
    working), importing the module decides instead.

    Raises:
        UsageError: the package does not install, the module is not in it, or the module does not import.
    """
    module = module or default_module(sdist)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="mlsubmit-preflight-") as tmp:
        work = Path(tmp)
        venv_dir, installed = work / "venv", ()
        from mlsubmit.packaging.runtime_dist import build_runtime, sdist_needs_runtime

        if sdist_needs_runtime(sdist.path):  # installed first, as the job's package URIs list it
            extra_packages = (build_runtime(work).path, *extra_packages)
        for extra in extra_packages:
            installed += install_package(extra, venv_dir)[1]
        python, _ = install_package(sdist, venv_dir, requirements=False)
        # the module first: a --module-name that is not in the package fails before anything is fetched
        find_module(python, venv_dir, module, cwd=work, timeout=timeout, package=sdist.package)
        installed += tuple(install_requirements(python, sdist.path, cwd=venv_dir, env=_index_env(venv_dir)))
        check, origin = check_module(python, work / "venv", module, cwd=work, timeout=timeout,
                                     package=sdist.package)
    return PreflightResult(module, check, origin, time.perf_counter() - started, installed)


def _cache_key(sdist: Sdist, module: str, extra_packages: tuple) -> str:
    """What a pre-flight's outcome depends on: the sdist's bytes, the module, the extra packages' bytes,
    mlsubmit-runtime's sdist when the package uses it, and the Python and mlsubmit that run it."""
    import sys

    from mlsubmit import __version__
    from mlsubmit.packaging.runtime_dist import runtime_plan, sdist_needs_runtime
    from mlsubmit.packaging.sdist import archive_digest, file_sha256

    parts = [sdist.sha256, module, sys.version, __version__, *(file_sha256(Path(p)) for p in extra_packages)]
    if sdist_needs_runtime(sdist.path):
        parts.append(archive_digest(runtime_plan())[0])
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def checked_once(sdist: Sdist, module: str | None = None, *, timeout: float = 120.0,
                 extra_packages: tuple = ()) -> PreflightResult:
    """`preflight`, once per content: a passed check is kept under $MLSUBMIT_HOME/preflight/ by `_cache_key`, so
    packaging an unchanged package again installs nothing (the result says `cached`). A failure is never kept."""
    from mlsubmit.local.venvs import mlsubmit_home

    module = module or default_module(sdist)
    kept = mlsubmit_home() / "preflight" / f"{_cache_key(sdist, module, tuple(extra_packages))}.json"
    try:
        saved = json.loads(kept.read_text(encoding="utf-8"))
        return PreflightResult(saved["module"], saved["check"], saved["origin"], 0.0, tuple(saved["installed"]),
                               cached=True)
    except (OSError, ValueError, KeyError, TypeError):
        pass
    result = preflight(sdist, module, timeout=timeout, extra_packages=extra_packages)
    kept.parent.mkdir(parents=True, exist_ok=True)
    partial = kept.with_name(f".{kept.name}.{os.getpid()}")
    partial.write_text(json.dumps({"module": result.module, "check": result.check, "origin": result.origin,
                                   "installed": list(result.installed)}), encoding="utf-8")
    os.replace(partial, kept)
    return result
