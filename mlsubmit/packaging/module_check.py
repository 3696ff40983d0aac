"""Check, without running it, that the module a job will run is there and would import: the pre-flight's last step.

The cloud starts a replica with `python -m <module>`. Running that here (or even `--help`) would run the job for
a trainer that does not parse its arguments (reading data, training, uploading) before anything is submitted, and
a module that reads a relative file at import would fail only because it runs somewhere else. So nothing of the
package is executed. The venv's own Python (the image's, when the pre-flight runs on the image's environment)
runs `_PROBE`, which:

1. finds the module and each package above it with `importlib.machinery.PathFinder` walking the packages'
   `__path__` (the way `import` finds them, but without executing any `__init__.py`); a package as the module
   needs a `__main__.py`, as `python -m` does;
2. compiles each of those files (the package `__init__.py`s, the module) with that Python: a syntax the image's
   Python does not have fails here;
3. compiles every other `.py` file of the package the module belongs to (a `model.py` the task imports fails at
   start just the same), and looks up the top-level imports all those files make unconditionally (module-level
   `import x` / `from x import y`, not those inside `try`, `if` or functions) with
   `importlib.util.find_spec(top-level name)`, which executes nothing for a top-level name: an import the image,
   the package and its declared requirements do not provide fails here as it would fail in the cloud;
4. reports the versions of Keras, TensorFlow and scikit-learn the environment holds, against which the files are
   read for APIs those releases removed (mlsubmit.images.removed: `keras.utils.multi_gpu_model`, gone since
   TensorFlow 2.4, `sklearn.externals.joblib`, …), not imported.

The probe is written for every Python an image may carry (3.5+: no f-strings, no walrus).
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from mlsubmit.errors import UsageError
from mlsubmit.local import children

_PROBE = r'''
import ast, importlib.machinery, importlib.util, json, os, sys
module = sys.argv[1]
parts = module.split(".")
out = {"python": sys.version.split()[0], "files": [], "imports": [], "missing": None, "error": None}

def conditional_free(body):
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node

def finish():
    print(json.dumps(out))
    sys.exit(0)

path, spec = None, None
for i in range(len(parts)):
    name = ".".join(parts[:i + 1])
    try:
        spec = importlib.util.find_spec(name) if i == 0 else importlib.machinery.PathFinder.find_spec(name, path)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        out["missing"] = name
        finish()
    if i == 0:
        out["origin"] = spec.origin or ""
    if i < len(parts) - 1:
        if spec.submodule_search_locations is None:
            out["missing"] = ".".join(parts[:i + 2])
            finish()
        path = list(spec.submodule_search_locations)
    if spec.origin and spec.origin.endswith(".py") and os.path.isfile(spec.origin):
        out["files"].append(spec.origin)
out["origin"] = spec.origin or ""
if spec.submodule_search_locations is not None:  # a package: `python -m` runs its __main__
    main = importlib.machinery.PathFinder.find_spec(module + ".__main__", list(spec.submodule_search_locations))
    if main is None:
        out["error"] = "No module named %s.__main__; '%s' is a package and cannot be directly executed" % (
            module, module)
        finish()
    out["origin"] = main.origin or ""
    if main.origin and main.origin.endswith(".py"):
        out["files"].append(main.origin)
# then every other .py file of the package the module belongs to: the cloud imports whatever the module imports,
# and a package's other modules (model.py importing hypertune) fail there at start just the same
package_dirs = []
top_spec = importlib.util.find_spec(parts[0])
if top_spec is not None and top_spec.submodule_search_locations:
    package_dirs = [d for d in top_spec.submodule_search_locations if os.path.isdir(d)]
checked = set(map(os.path.realpath, out["files"]))
for directory in package_dirs:
    for root, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        for name in sorted(names):
            filename = os.path.join(root, name)
            if name.endswith(".py") and os.path.realpath(filename) not in checked:
                checked.add(os.path.realpath(filename))
                out["files"].append(filename)
wanted = {}
for filename in out["files"]:
    with open(filename, "rb") as handle:
        source = handle.read()
    short = os.path.relpath(filename, os.path.dirname(package_dirs[0])) if package_dirs else os.path.basename(filename)
    try:
        tree = compile(source, filename, "exec", ast.PyCF_ONLY_AST)
        compile(tree, filename, "exec")
    except SyntaxError as err:
        out["error"] = "SyntaxError: %s (%s, line %s)" % (err.msg, short, err.lineno)
        finish()
    for node in conditional_free(tree.body):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            ([node.module] if node.module and not node.level else [])
        for name in names:
            wanted.setdefault(name.split(".")[0], (short, node.lineno))
    out.setdefault("names", []).append(short)
for top in sorted(wanted):
    try:
        found = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        found = None
    if found is None:
        where, line = wanted[top]
        out["error"] = "ModuleNotFoundError: No module named '%s' (imported by %s, line %s)" % (top, where, line)
        finish()
    out["imports"].append(top)
# the versions of the libraries whose removed APIs mlsubmit.images.removed knows, as this environment has them
out["versions"] = {}
for distribution in json.loads(sys.argv[2]) if len(sys.argv) > 2 else ():
    try:
        try:
            import importlib.metadata as metadata
            out["versions"][distribution] = metadata.version(distribution)
        except ImportError:  # Python < 3.8
            import pkg_resources
            out["versions"][distribution] = pkg_resources.get_distribution(distribution).version
    except Exception:
        pass
finish()
'''


@dataclass(frozen=True)
class ModuleCheck:
    """What was checked of one module, without running it."""

    module: str
    origin: str  # the file `python -m <module>` would run
    python: str  # the version of the Python that checked it ("3.10.13")
    files: tuple[str, ...]  # the files compiled: package __init__s and the module
    imports: tuple[str, ...]  # the top-level imports found

    def describe(self) -> str:
        """What was checked, one phrase: "tinypkg.task found; the package's 3 files compiled by Python 3.10.13,
        their module-level imports found: argparse, numpy; not run"."""
        found = (f"their module-level imports found: {', '.join(self.imports)}" if self.imports
                 else "no module-level imports")
        return (f"{self.module} found; the package's {len(self.files)} file{'' if len(self.files) == 1 else 's'} "
                f"compiled by Python {self.python}, {found}; not run")


def module_missing(module: str, package: str | None) -> UsageError:
    """The one message for a module the job would run that the package does not have."""
    holding = f" (it holds the package {package!r})" if package else ""
    return UsageError(f"module {module!r} is not in the package{holding}",
                      hint=f"pass --module-name with one of its modules, e.g. {package or '<package>'}.task")


def _clean_env(cwd: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("PIP_") and k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")}
    env.update(PYTHONNOUSERSITE="1", PWD=str(cwd))
    return env


def probe(python: Path, module: str, *, cwd: Path, timeout: float = 120.0) -> dict:
    """The raw answer of `_PROBE` run by `python` (see the module docstring). Raises UsageError."""
    from mlsubmit.images.removed import distributions

    try:
        done = children.run([str(python), "-c", _PROBE, module, json.dumps(distributions())], capture_output=True,
                            text=True, timeout=timeout,
                            cwd=cwd, env=_clean_env(cwd), stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise UsageError(f"looking up {module} in the installed package gave no answer within {timeout:.0f} s") \
            from None
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        last = (done.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise UsageError(f"looking up {module} in the installed package failed: {last}") from None


def find_module(python: Path, venv_dir: Path, module: str, *, cwd: Path, timeout: float = 120.0,
                package: str | None = None) -> dict:
    """The probe's answer for `module` in the venv, which must hold it.

    Raises:
        UsageError: the module is not in the installed package, or something outside the venv shadows it.
    """
    answer = probe(python, module, cwd=cwd, timeout=timeout)
    if answer.get("missing"):
        raise module_missing(module, package)
    origin = answer.get("origin") or ""
    if origin and not Path(origin).resolve().is_relative_to(Path(venv_dir).resolve()):
        raise UsageError(f"{module} was found at {origin}, not in the package installed in the fresh venv",
                         hint="a module of the same name shadows it in the environment")
    return answer


def check_module(python: Path, venv_dir: Path, module: str, *, cwd: Path, timeout: float = 120.0,
                 package: str | None = None) -> tuple[str, str]:
    """Check that `module` comes from `venv_dir`, compiles and finds its imports, without running any of it:
    returns (what was checked, in words; the module's file).

    Raises:
        UsageError: the module is missing, shadowed from outside the venv, does not compile, or imports what
            the environment lacks.
    """
    checked = inspect_module(python, venv_dir, module, cwd=cwd, timeout=timeout, package=package)
    return checked.describe(), checked.origin


def inspect_module(python: Path, venv_dir: Path, module: str, *, cwd: Path, timeout: float = 120.0,
                   package: str | None = None) -> ModuleCheck:
    """`check_module`, with the details. Raises UsageError."""
    from mlsubmit.images.removed import find_removed

    answer = find_module(python, venv_dir, module, cwd=cwd, timeout=timeout, package=package)
    if answer.get("error"):
        raise UsageError(f"{module} does not import from the installed package on Python {answer['python']}: "
                         f"{answer['error']}",
                         hint="declare what it imports in the package's requirements and fix the module; "
                              "--skip-preflight skips this check")
    use = find_removed(zip(answer.get("names") or (), answer["files"]), answer.get("versions") or {})
    if use is not None:
        raise UsageError(f"{module} does not run on the installed package's environment (Python "
                         f"{answer['python']}): {use.message()}",
                         hint="change the code; --skip-preflight skips this check")
    return ModuleCheck(module, answer.get("origin") or "", answer["python"], tuple(answer["files"]),
                       tuple(answer["imports"]))
