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
    assert check_module(python, venv_dir, "tinypkg.task", cwd=tmp_path)[0] == "--help"
    assert check_module(python, venv_dir, "tinypkg.strict", cwd=tmp_path)[0] == "import"  # --help fails: import
    with pytest.raises(UsageError, match="'tinypkg.nothere' is not in the package"):
        check_module(python, venv_dir, "tinypkg.nothere", cwd=tmp_path)
    # mlsubmit is importable from its working tree (editable install): that must not count as installed
    with pytest.raises(UsageError, match="not from the package installed in the fresh venv"):
        check_module(python, venv_dir, "mlsubmit.errors", cwd=tmp_path)


def test_a_module_that_does_not_import_fails_with_its_error(tmp_path):
    project = make_project(tmp_path / "proj", task="import tensorflow_that_does_not_exist\n")
    sdist = build_sdist(project, dist_dir=tmp_path / "dist")
    with pytest.raises(UsageError) as err:
        preflight(sdist)
    message = err.value.one_line()
    assert "tinypkg.task does not import" in message
    assert "ModuleNotFoundError: No module named 'tensorflow_that_does_not_exist'" in message
    assert err.value.exit_code == 2


@pytest.mark.skipif(not (ROOT / "trainer" / "task.py").exists(), reason="trainer/task.py not written yet")
def test_bundled_trainer_installs_and_answers_help(tmp_path):
    sdist = build_sdist(ROOT / "trainer", dist_dir=tmp_path / "dist")
    result = preflight(sdist)
    assert (result.module, result.check) == ("trainer.task", "--help")
    assert "mlsubmit-preflight-" in result.origin  # not the working tree's trainer
