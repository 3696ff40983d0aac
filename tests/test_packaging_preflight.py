"""The pre-flight: the sdist installs offline into a fresh venv and its module starts from there."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support.tiny_package import make_project, write

from mlsubmit.errors import UsageError
from mlsubmit.packaging import build_sdist, check_module, install_into_venv, preflight

ROOT = Path(__file__).resolve().parent.parent


def test_install_into_venv_gives_the_package_as_built(tmp_path):
    package = make_project(tmp_path / "proj")
    write(package / "strict.py", "import sys\nif __name__ == '__main__':\n    sys.exit('takes no flags')\n")
    sdist = build_sdist(package, dist_dir=tmp_path / "dist")
    venv_dir = tmp_path / "venv"
    python = install_into_venv(sdist, venv_dir)
    probe = ("import importlib.metadata as md, json, pathlib, tinypkg, tinypkg.sub.mod as mod\n"
             "here = pathlib.Path(tinypkg.__file__).parent\n"
             "print(tinypkg.__file__)\n"
             "print(mod.VALUE, json.loads((here / 'data' / 'config.json').read_text())['learning_rate'],"
             " (here / 'run.sh').exists(), md.version('tinypkg'), md.requires('tinypkg'))\n")
    done = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, cwd=tmp_path, check=True)
    location, values = done.stdout.splitlines()
    assert Path(location).resolve().is_relative_to(venv_dir.resolve())
    assert values == "42 0.1 True 1.2.0 ['requests>=2', 'numpy']"

    # the same venv answers module checks (what the local runner reuses)
    said = check_module(python, venv_dir, "tinypkg.task", cwd=tmp_path)[0]
    assert said.startswith("tinypkg.task found; the package's") and "compiled by Python 3.11" in said \
        and "imports found: argparse, sys" in said
    assert said.endswith("; not run")
    assert check_module(python, venv_dir, "tinypkg.strict", cwd=tmp_path)[0].endswith("not run")
    with pytest.raises(UsageError, match="'tinypkg.nothere' is not in the package"):
        check_module(python, venv_dir, "tinypkg.nothere", cwd=tmp_path)
    # mlsubmit is importable from its working tree (editable install): that must not count as installed
    with pytest.raises(UsageError, match="not in the package installed in the fresh venv"):
        check_module(python, venv_dir, "mlsubmit.errors", cwd=tmp_path)


def test_a_module_that_does_not_import_fails_with_its_error(tmp_path):
    project = make_project(tmp_path / "proj", task="import tensorflow_that_does_not_exist\n")
    sdist = build_sdist(project, dist_dir=tmp_path / "dist")
    with pytest.raises(UsageError) as err:
        preflight(sdist)
    message = err.value.one_line()
    assert "tinypkg.task does not import from the installed package on Python 3.11" in message
    assert "ModuleNotFoundError: No module named 'tensorflow_that_does_not_exist' (imported by tinypkg/task.py, line 1)" \
        in message
    assert err.value.exit_code == 2


@pytest.mark.skipif(not (ROOT / "trainer" / "task.py").exists(), reason="trainer/task.py not written yet")
def test_bundled_trainer_installs_and_answers_help(tmp_path):
    sdist = build_sdist(ROOT / "trainer", dist_dir=tmp_path / "dist")
    result = preflight(sdist)
    assert result.module == "trainer.task" and result.check.endswith("not run")
    assert result.environment.startswith("mlsubmit's own environment (Python 3.11")
    assert "mlsubmit-preflight-" in result.origin  # not the working tree's trainer


def _project(root: Path, *, requires: list[str], init: str = "", task: str) -> Path:
    """A package `shapes` with `task.py` and `__init__.py` as given, declaring `requires`."""
    write(root / "setup.py", "from setuptools import setup, find_packages\n"
                             f"setup(name='shapes', version='0.1', packages=find_packages(), install_requires={requires!r})\n")
    write(root / "shapes" / "__init__.py", init)
    write(root / "shapes" / "task.py", task)
    return root / "shapes"


def _wheel(where: Path, name: str, version: str, code: str) -> Path:
    """A real, minimal pure-Python wheel of `name` (one module), as an index would serve it."""
    import base64
    import hashlib
    import zipfile

    info = f"{name}-{version}.dist-info"
    files = {f"{name}.py": code, f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = [f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},"
              f"{len(text.encode())}" for path, text in files.items()]
    files[f"{info}/RECORD"] = "\n".join(record + [f"{info}/RECORD,,"]) + "\n"
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for member, text in files.items():
            archive.writestr(member, text)
    return path


def test_the_preflight_never_runs_the_job_and_installs_requirements_before_looking(tmp_path, monkeypatch):
    """#25: a script trainer (no argument parser, work at module level, reading a relative file) is checked without
    running; #21: an __init__ importing a requirement the package declares passes (it was imported before the
    requirements were installed)."""
    ran = tmp_path / "RAN"
    script = (f"import os\nimport shapes_dep\nopen({str(ran)!r}, 'w').write('the job ran')\n"
              "data = open('data/train.csv').read()  # relative to the job's directory, not the pre-flight's\n")
    package = _project(tmp_path / "proj", requires=["shapes-dep==1.0"], init="import shapes_dep\n", task=script)
    links = tmp_path / "links"
    _wheel(links, "shapes_dep", "1.0", "VALUE = 1\n")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    result = preflight(build_sdist(package, dist_dir=tmp_path / "dist"))
    assert not ran.exists()
    assert result.installed == ("shapes-dep==1.0",)
    assert result.check.startswith("shapes.task found; the package's 2 files compiled by Python 3.11")
    assert "imports found: os, shapes_dep; not run" in result.check

    # an import nothing provides is named with its file and line, before anything runs
    write(package / "task.py", "import os\n\nimport shapes_undeclared\n" + script)
    with pytest.raises(UsageError, match=r"No module named 'shapes_undeclared' \(imported by shapes/task.py, line 3\)"):
        preflight(build_sdist(package, dist_dir=tmp_path / "dist2"))
    assert not ran.exists()


def test_the_preflight_runs_on_the_base_environments_python(tmp_path):
    """The image's Python decides: a `match` statement compiles on 3.11 (mlsubmit's) but not on a 3.8 image."""
    from mlsubmit.images.interpreters import find_python
    from mlsubmit.packaging.preflight import BaseEnv

    old = find_python("3.8")
    if old is None:
        pytest.skip("no Python 3.8 on this machine")
    task = "import sys\n\nmatch sys.argv:\n    case _:\n        pass\n"
    sdist = build_sdist(_project(tmp_path / "proj", requires=[], task=task), dist_dir=tmp_path / "dist")
    with pytest.raises(UsageError) as err:
        preflight(sdist, base=BaseEnv(old, "image test's environment"))
    assert "shapes.task does not import from the installed package on Python 3.8" in err.value.one_line()
    assert "SyntaxError: invalid syntax (shapes/task.py, line 3)" in err.value.one_line()


def test_one_rule_says_which_requirements_an_environment_lacks_for_local_venvs_and_job_environments(tmp_path):
    """Installed metadata decides (no pip): a requirement with extras counts as missing (pip installs what the extras
    add, e.g. requests[socks] adds PySocks), as does an absent or too old distribution; an extra's own requirement,
    and one the listed distributions satisfy themselves, do not."""
    import os
    import sys

    from mlsubmit.images.missing import missing_requirements

    info = tmp_path / "site" / "user_trainer-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: user-trainer\nVersion: 1.0\n"
                                   "Requires-Dist: packaging\nRequires-Dist: packaging[extra-deps]\n"
                                   "Requires-Dist: pip>=999\nRequires-Dist: no-such-distribution-here>=1\n"
                                   "Requires-Dist: numpy; extra == \"plots\"\nRequires-Dist: User_Trainer\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    assert missing_requirements(Path(sys.executable), ["user-trainer"], env=env) == [
        "no-such-distribution-here>=1", "packaging[extra-deps]", "pip>=999"]


def test_an_api_the_environments_release_removed_is_named_from_the_source(tmp_path):
    """The pre-flight reports the environment's scikit-learn, TensorFlow and Keras versions; the files are read against
    mlsubmit.images.removed's table (not imported), as the image check reads them against the image's."""
    project = make_project(tmp_path / "proj", task="import sklearn\nfrom sklearn.externals import joblib\n")
    sdist = build_sdist(project, dist_dir=tmp_path / "dist")
    with pytest.raises(UsageError) as err:
        preflight(sdist)
    message = err.value.one_line()
    assert "tinypkg.task does not run on the installed package's environment (Python 3.11" in message, message
    assert "tinypkg/task.py line 2: sklearn.externals.joblib is not in scikit-learn " in message
    assert "which the environment holds: scikit-learn 0.23 removed it; import joblib replaces it" in message
