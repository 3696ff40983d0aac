#!/usr/bin/env python3
"""The README's two Quickstart commands: `python3 dev.py job` and `python3 dev.py test`.

Each works on a fresh clone with only Python >= 3.10 and pip: it creates `.venv/` beside this file (unless a
virtual environment is already active), installs the project with its test extra there (again only when
pyproject.toml changed), then runs the main job (examples/digits_job.py: a two-replica local cluster trains on the
digits data, then `mlsubmit predict` scores the model) or the whole test suite.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"


def _python() -> Path:
    if sys.prefix != sys.base_prefix:  # already inside a virtual environment: use it
        return Path(sys.executable)
    if not (VENV / "bin" / "python").exists():
        print(f"creating {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    return VENV / "bin" / "python"


def _install(python: Path) -> None:
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    stamp = Path(subprocess.check_output([str(python), "-c", "import sys; print(sys.prefix)"], text=True).strip())
    stamp = stamp / ".mlsubmit-installed"
    if stamp.exists() and stamp.read_text() == digest:
        return
    print("installing mlsubmit and its test dependencies (first run: a few minutes)", flush=True)
    pip = [str(python), "-m", "pip", "--disable-pip-version-check"]
    subprocess.check_call(pip + ["install", "-q", "--upgrade", "pip"])
    subprocess.check_call(pip + ["install", "-q", "-e", f"{ROOT}[test]"])
    stamp.write_text(digest)


def _compiled(python: Path, env: dict) -> None:
    """Where PYTHONDONTWRITEBYTECODE is set (as on this project's machines), no process may keep what it compiles,
    so every `python -m mlsubmit` the suite starts compiled mlsubmit's modules again (about 6 % of the CPU of the
    CLI-heavy test files, measured). They are compiled once, before the run, as pip compiles what it installs (into
    __pycache__, which git ignores)."""
    if env.get("PYTHONDONTWRITEBYTECODE"):
        # not the packages tests copy and package as users' (trainer/, tests/fixtures/, tests/support/keras2_trainer/)
        subprocess.call([str(python), "-m", "compileall", "-q", "-j", "0", str(ROOT / "mlsubmit"),
                         *map(str, (ROOT / "tests" / "support").glob("*.py"))], env=env, stdout=subprocess.DEVNULL)


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"job", "test"}:
        print("usage: python3 dev.py job|test [extra arguments]", file=sys.stderr)
        return 2
    python = _python()
    _install(python)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if argv[0] == "test":
        _compiled(python, env)
        # one worker (pytest-xdist) more than the cores, at most three, each taking whole test files so a file's
        # module fixtures start once: tests also wait on subprocesses and servers, so on 2 cores three workers kept
        # the CPU 98 % busy against 85 % with two (1,387 tests in 653 s against 719-731 s, measured 2026-12-07);
        # files are handed out heaviest first, in the order tests/support/ordering.py gives (not xdist's by count)
        workers = str(min(3, (os.cpu_count() or 1) + 1))
        parallel = [] if any(arg == "-n" or arg.startswith(("-n", "--numprocesses")) or arg == "no:xdist"
                             for arg in argv[1:]) else ["-n", workers, "--dist", "loadfile", "--no-loadscope-reorder"]
        cmd = [str(python), "-m", "pytest", *parallel, *argv[1:]]
    else:
        cmd = [str(python), str(ROOT / "examples" / "digits_job.py"), *argv[1:]]
    return subprocess.call(cmd, cwd=ROOT, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
