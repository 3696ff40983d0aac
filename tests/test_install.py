"""The light core as users install it (#37): the built wheel into fresh `python3 -m venv`s, each with the pip that
`venv` gives (23.0.1 on Python 3.10, 23.2.1 on 3.11/3.12 here), never upgraded.

- On every CPython this machine has (3.10-3.13, pyenv), `pip install mlsubmit` brings no ML framework: installed for
  real on the oldest (pip 23.0.1) and the newest (pip 24.2), each by its own venv's pip; for those between, as for
  3.14 and 3.15, pip's resolver says what it would install there (wheels only). The installed core's commands run:
  `--help` of every command, `config --tier CUSTOM --gpus 4` (each Python), `package` and `train --local` of a small
  package on the job's image environment (the oldest), `mlsubmit emulator` with the `[emulator]` extra (the newest).
- Into a venv that already holds TensorFlow 2.17.1 (the tf-cpu.2-17 image's environment), pip's resolver changes
  none of its TensorFlow, Keras, numpy or protobuf: TensorFlow 2.17.1 and the core resolve together.
- A command whose extra is missing says so in one line naming the extra, exit 2, before any work.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from support.built_wheel import mlsubmit_wheel
from support.engine_clusters import stock_python
from support.training_emulator import start_emulator_command

pytestmark = pytest.mark.slow  # every test here installs into or resolves for fresh venvs (the fast tier leaves them out)

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "trainers"
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
# what the core must never bring into a user's environment (nor change there)
FRAMEWORK = {"tensorflow", "tensorflow-cpu", "tensorflow-intel", "keras", "tf-keras", "tensorboard", "jax",
             "jaxlib", "torch", "numpy", "h5py", "matplotlib", "optuna"}
PIP_QUIET = ["--disable-pip-version-check", "--no-input"]
# pip's byte-compiling of every module it installs (seconds a venv) is not what these tests prove: a module is
# compiled when it is first imported instead, as in any venv
INSTALL = ["install", *PIP_QUIET, "-q", "--no-compile"]


def _run(argv: list, *, timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, **kwargs)


def _names(report: dict) -> dict[str, str]:
    return {item["metadata"]["name"].lower().replace("_", "-"): item["metadata"]["version"]
            for item in report["install"]}


@pytest.fixture(scope="module")
def wheel() -> Path:
    """mlsubmit's wheel, built from the checkout as a release is (pip's PEP 517 build, isolated), once for its
    sources' content (support/built_wheel.py)."""
    return mlsubmit_wheel()


def _venv(python: str, where: Path) -> tuple[Path, str]:
    """A fresh `python -m venv` and the version of the pip it gave."""
    done = _run([python, "-m", "venv", where], timeout=300)
    assert done.returncode == 0, done.stderr
    return where / "bin" / "python", _installed(where)["pip"]


def _installed(venv: Path) -> dict[str, str]:
    """What the venv holds, name -> version, from its site-packages' .dist-info folders (what `pip list` reads)."""
    (site,) = venv.glob("lib/python3.*/site-packages")
    return {info.name[:-len(".dist-info")].rpartition("-")[0].lower().replace("_", "-"):
            info.name[:-len(".dist-info")].rpartition("-")[2] for info in site.glob("*.dist-info")}


def _core_venv(python: str, where: Path, wheel: Path) -> dict:
    """A fresh venv of `python` with its own pip, and `pip install <wheel>` in it, as a user installs."""
    venv_python, pip = _venv(python, where)
    done = _run([venv_python, "-m", "pip", *INSTALL, wheel], timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return {"venv": where, "pip": pip, "installed": _installed(where), "mlsubmit": where / "bin" / "mlsubmit"}


@pytest.fixture(scope="module")
def core_venvs(wheel, tmp_path_factory) -> dict[str, dict]:
    """The oldest and the newest CPython this machine has stock (pyenv), side by side: each a fresh venv with its own
    pip (the oldest pip there is, 23.0.1, and the newest) and the real install, whose commands the tests run. Those
    between install the same wheels: pip's resolver answers for them without a venv
    (test_pips_resolver_accepts_the_core_on_pythons_between_and_after; a venv and its pip's resolve cost 11 CPU-s,
    the answer 2.6)."""
    pythons = {version: stock_python(version) for version in PYTHONS}
    pythons = {version: found.path for version, found in pythons.items() if found is not None}
    if not pythons:
        pytest.skip("no stock CPython 3.10-3.13 (pyenv) on this machine")
    ends = {version: pythons[version] for version in (min(pythons), max(pythons))}
    root = tmp_path_factory.mktemp("venvs")
    with ThreadPoolExecutor(max_workers=len(ends)) as pool:
        futures = {version: pool.submit(_core_venv, python, root / f"py{version}", wheel)
                   for version, python in ends.items()}
        return {version: future.result() for version, future in futures.items()}


def _user_env(tmp_path: Path, images_home: Path) -> dict[str, str]:
    """A user's environment: nothing of the test venv on PATH or PYTHONPATH; image environments on (the default)."""
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV", "MLSUBMIT_IMAGE_ENV"}}
    return {**env, "MLSUBMIT_HOME": str(tmp_path / "home"), "MLSUBMIT_IMAGES": str(images_home), "NO_COLOR": "1",
            "TERM": "dumb", "COLUMNS": "200"}


def _commands(mlsubmit: Path, env: dict) -> list[list[str]]:
    """Every command and sub-command path, as `--help` lists them (["train"], ["jobs", "list"], …)."""
    paths, todo = [], [[]]
    while todo:
        path = todo.pop()
        shown = _run([mlsubmit, *path, "--help"], env=env, timeout=60)
        assert shown.returncode == 0 and shown.stderr == "", (path, shown.stderr[-2000:])
        paths.append(path)
        section = shown.stdout.split("Commands", 1)[1] if "Commands" in shown.stdout else ""
        todo += [path + [name] for name in re.findall(r"^[│ ]\s*([a-z][a-z0-9-]*)\s{2,}", section, re.MULTILINE)]
    return paths


def test_the_core_installs_on_every_python_here_with_no_framework_and_its_commands_run(core_venvs, tmp_path,
                                                                                       images_home):
    env = _user_env(tmp_path, images_home)
    for version, venv in core_venvs.items():
        brought = FRAMEWORK & set(venv["installed"])
        assert "mlsubmit" in venv["installed"] and not brought, f"Python {version}: the core brought {sorted(brought)}"
        config = _run([venv["mlsubmit"], "config", "--tier", "CUSTOM", "--gpus", "4"], env=env, cwd=tmp_path)
        assert config.returncode == 0, (version, config.stderr)
        assert "acceleratorCount: 4" in config.stdout, config.stdout
    assert {v["pip"].split(".")[0] for k, v in core_venvs.items() if k == "3.10"} <= {"23"}, core_venvs
    newest = core_venvs[max(core_venvs)]
    helped = _commands(newest["mlsubmit"], env)
    assert {"train", "config", "package", "predict", "emulator", "jobs", "cache"} <= {p[0] for p in helped if p}


def test_on_the_oldest_python_a_pyproject_only_package_is_packaged(core_venvs, tmp_path, images_home):
    """`mlsubmit package` reads the project's pyproject.toml: on Python 3.10, which has no tomllib, through tomli
    (this failed with "No module named 'tomllib'" until 2026-12-07)."""
    venv = core_venvs[min(core_venvs)]
    project = shutil.copytree(FIXTURES / "pyproject_setuptools", tmp_path / "project")
    packaged = _run([venv["mlsubmit"], "package", "--skip-preflight"], env=_user_env(tmp_path, images_home),
                    cwd=project, timeout=600)
    assert packaged.returncode == 0, packaged.stdout[-3000:] + packaged.stderr[-3000:]
    assert "tomllib" not in packaged.stderr and list(project.glob("dist/*.tar.gz")), packaged.stdout[-2000:]


def test_on_the_oldest_python_the_pre_flight_on_the_users_own_python_builds_a_setup_py_package(core_venvs, tmp_path,
                                                                                               images_home):
    """With image environments off, the pre-flight installs the package on the user's own Python: there a 3.10 venv
    has setuptools 65.5 and no `wheel`, which cannot build a wheel alone, so pip builds it in isolation with
    setuptools from the index, as the cloud's pip does (this failed with "invalid command 'bdist_wheel'" until
    2026-12-07)."""
    venv = core_venvs[min(core_venvs)]
    project = shutil.copytree(FIXTURES / "same_relative_path", tmp_path / "project")
    packaged = _run([venv["mlsubmit"], "package", "--package-path", "samepath", "--module-name", "samepath.task"],
                    env={**_user_env(tmp_path, images_home), "MLSUBMIT_IMAGE_ENV": "0"}, cwd=project, timeout=600)
    assert packaged.returncode == 0, packaged.stdout[-3000:] + packaged.stderr[-3000:]
    assert re.search(r"preflight ok: installed in a fresh venv on mlsubmit's own environment \(Python 3\.10\.\d+\)",
                     packaged.stdout), packaged.stdout[-3000:]


def test_the_core_packages_and_trains_a_package_here_on_the_image_environment(core_venvs, tmp_path, images_home):
    venv = core_venvs[min(core_venvs)]  # the oldest Python, with the oldest pip
    project = shutil.copytree(FIXTURES / "vertex_strict", tmp_path / "project")
    env = _user_env(tmp_path, images_home)
    packaged = _run([venv["mlsubmit"], "package", "--skip-preflight"], env=env, cwd=project)
    assert packaged.returncode == 0, packaged.stderr[-3000:]
    trained = _run([venv["mlsubmit"], "train", "--local", "--job-dir", tmp_path / "job"], env=env, cwd=project,
                   timeout=900)
    assert trained.returncode == 0, trained.stdout[-3000:] + trained.stderr[-3000:]
    assert re.search(r"installed on image tensorflow/tensorflow:2\.21\.0: Python 3\.11\.\d+, tensorflow(-cpu)? 2\.21",
                     trained.stdout), trained.stdout[-3000:]
    assert "SUCCEEDED" in trained.stdout and (tmp_path / "job" / "model" / "weights.json").is_file()


def test_the_emulator_runs_from_the_core_with_its_extra(core_venvs, wheel, tmp_path, images_home):
    venv = core_venvs[max(core_venvs)]
    done = _run([venv["venv"] / "bin" / "python", "-m", "pip", *INSTALL, f"{wheel}[emulator]"], timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    env = _user_env(tmp_path, images_home)
    process, said = start_emulator_command([str(venv["mlsubmit"]), "emulator", "--port", "0", "--gcs-port", "0"],
                                           tmp_path, env=env)
    try:
        endpoint = re.search(r"export MLSUBMIT_API_ENDPOINT=(\S+)", said).group(1)
        listed = _run([venv["mlsubmit"], "jobs", "list", "--project", "p", "--region", "us-central1", "--output",
                       "json"], env={**env, "MLSUBMIT_API_ENDPOINT": endpoint}, timeout=120)
        assert listed.returncode == 0 and json.loads(listed.stdout) == [], listed.stdout + listed.stderr
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.mark.parametrize("purpose, argv, extra", [
    ("predict", ["predict", "model.keras", "--input", "x.npy"], "tensorflow"),
    ("tuning here", ["train", "--local", "--hptune-config", "{hp}"], "tuning"),
    ("the emulator", ["emulator", "--port", "0"], "emulator"),
])
def test_a_missing_extra_is_one_line_naming_it_before_any_work(core_venvs, tmp_path, images_home, purpose, argv,
                                                               extra):
    venv = core_venvs[min(core_venvs)]
    project = shutil.copytree(FIXTURES / "vertex_strict", tmp_path / "project")
    (project / "model.keras").write_bytes(b"never read")
    hp = project / "hp.yaml"
    hp.write_text("trainingInput:\n  hyperparameters:\n    goal: MAXIMIZE\n    hyperparameterMetricTag: acc\n"
                  "    maxTrials: 2\n    params:\n    - parameterName: lr\n      type: DOUBLE\n      minValue: 0.01\n"
                  "      maxValue: 0.1\n")
    env = _user_env(tmp_path, images_home)
    done = _run([venv["mlsubmit"], *(a.format(hp=hp) for a in argv)], env=env, cwd=project, timeout=120)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, (purpose, done.stderr)
    assert f"pip install 'mlsubmit[{extra}]'" in done.stderr, done.stderr
    assert done.stdout == "" and not (tmp_path / "home").exists() and not (project / "jobs").exists()


def test_a_tensorflow_217_venv_keeps_its_framework(core_venvs, wheel, tmp_path, images_home, monkeypatch):
    """pip (23.0.1, the user's) resolving `pip install mlsubmit` into the tf-cpu.2-17 image's environment, which holds
    TensorFlow 2.17.1 with Keras 3, tf-keras 2.17, protobuf 4 and numpy 1: none of TensorFlow, Keras, tf-keras,
    TensorBoard or numpy is to be installed. pip's resolver does not weigh what is already installed, so the newest
    Google client libraries would lift protobuf to 6+ (pip then warns that TensorFlow 2.17 wants protobuf<5); with the
    venv's own packages as constraints — the install line the docs give for a project venv — nothing of it changes:
    TensorFlow 2.17.1 (with its protobuf 4) and the core resolve together (`pip install tensorflow==2.17.1 mlsubmit`
    was ResolutionImpossible while mlsubmit pinned TensorFlow 2.21)."""
    from mlsubmit.images import catalog as images
    from mlsubmit.images.envs import image_python

    monkeypatch.setenv("MLSUBMIT_IMAGE_ENV", "1")
    python, _ = image_python(images.tensorflow_image("2.17"))
    venv = core_venvs[min(core_venvs)]
    pip = [venv["venv"] / "bin" / "python", "-m", "pip", "--python", python]
    frozen = _run([*pip, "freeze", *PIP_QUIET])
    held = {line.split("==")[0].lower().replace("_", "-"): line.split("==")[1]
            for line in frozen.stdout.splitlines() if "==" in line}
    assert (held["tensorflow"], held["keras"][0], held["protobuf"][0]) == ("2.17.1", "3", "4"), held
    constraints = tmp_path / "constraints.txt"
    constraints.write_text(frozen.stdout)
    plain, kept = tmp_path / "plain.json", tmp_path / "kept.json"
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = [pool.submit(_run, [*pip, "install", *PIP_QUIET, "-q", "--dry-run", "--report", report, *more, wheel],
                            timeout=600) for report, more in ((plain, []), (kept, ["-c", constraints]))]
        for run in runs:
            done = run.result()
            assert done.returncode == 0, done.stderr[-3000:]
    changed = _names(json.loads(plain.read_text()))
    assert "mlsubmit" in changed and not set(changed) & FRAMEWORK, changed
    changed = _names(json.loads(kept.read_text()))
    assert "mlsubmit" in changed and not set(changed) & set(held), {k: held[k] for k in set(changed) & set(held)}


@pytest.mark.parametrize("version", ["3.11", "3.12", "3.14", "3.15"])
def test_pips_resolver_accepts_the_core_on_pythons_between_and_after(wheel, tmp_path, version):
    """What pip would install for the core on the Pythons core_venvs installs it on by the same wheels (3.11, 3.12)
    and on those this machine has not (3.14, 3.15): wheels only, no framework."""
    report = tmp_path / "report.json"
    done = _run([sys.executable, "-m", "pip", "install", *PIP_QUIET, "-q", "--dry-run", "--ignore-installed",
                 "--only-binary=:all:", "--python-version", version, "--target", tmp_path / "target",
                 "--report", report, wheel], timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    names = _names(json.loads(report.read_text()))
    assert "mlsubmit" in names and {"typer", "pyyaml", "google-cloud-storage"} <= set(names), names
    assert not set(names) & FRAMEWORK, names


def test_the_metadata_declares_every_python_from_310_to_315(wheel):
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        metadata = archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    assert "Requires-Python: >=3.10" in metadata
    declared = set(re.findall(r"Classifier: Programming Language :: Python :: (3\.\d+)", metadata))
    assert {"3.10", "3.11", "3.12", "3.13", "3.14", "3.15"} <= declared, declared
    requires = [line for line in metadata.splitlines() if line.startswith("Requires-Dist:") and "extra ==" not in line]
    assert requires and not any(re.match(r"Requires-Dist: (tensorflow|keras|tf-keras|numpy|torch|jax)\b", r)
                                for r in requires), requires


def test_pipx_and_uv_tool_installs_put_a_working_mlsubmit_on_path(wheel, tmp_path):
    """`pipx install mlsubmit` and `uv tool install mlsubmit`, the README's tool installs: each gives an `mlsubmit`
    in its own bin folder that runs, in a venv of its own with no framework."""
    tools = tmp_path / "tools"  # where pipx and uv come from is not under test: the suite's pip fills a bare venv
    done = _run([sys.executable, "-m", "venv", "--without-pip", tools], timeout=300)
    assert done.returncode == 0, done.stderr
    done = _run([sys.executable, "-m", "pip", "--python", tools / "bin" / "python", *INSTALL, "pipx", "uv"],
                timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    env = {**{k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")},
           "PIPX_HOME": str(tmp_path / "pipx"), "PIPX_BIN_DIR": str(tmp_path / "pipx-bin"),
           "UV_TOOL_DIR": str(tmp_path / "uv-tools"), "UV_TOOL_BIN_DIR": str(tmp_path / "uv-bin"),
           "UV_CACHE_DIR": str(tmp_path / "uv-cache"), "NO_COLOR": "1", "MLSUBMIT_HOME": str(tmp_path / "home")}
    with ThreadPoolExecutor(max_workers=2) as pool:
        runs = [pool.submit(_run, [tools / "bin" / tool, *args, wheel], env=env, timeout=900)
                for tool, args in (("pipx", ["install"]), ("uv", ["tool", "install"]))]
        for run in runs:
            done = run.result()
            assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (tmp_path / "m.keras").write_bytes(b"never read")
    for bin_dir in ("pipx-bin", "uv-bin"):
        config = _run([tmp_path / bin_dir / "mlsubmit", "config", "--tier", "CUSTOM", "--gpus", "4"], env=env,
                      cwd=tmp_path)
        assert config.returncode == 0 and "acceleratorCount: 4" in config.stdout, (bin_dir, config.stderr)
        framework = _run([tmp_path / bin_dir / "mlsubmit", "predict", "m.keras", "--input", "x.npy"], env=env,
                         cwd=tmp_path)
        assert framework.returncode == 2 and "pip install 'mlsubmit[tensorflow]'" in framework.stderr, framework.stderr
