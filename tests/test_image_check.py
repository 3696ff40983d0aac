"""A package is checked against the image it will run on before anything is uploaded: its requirements with pip's
resolver (network: the package index, as the cloud reaches it) and its syntax with the image's Python."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from mlsubmit.images import catalog as images

from mlsubmit.images import check as image_check
from mlsubmit.errors import UsageError
from mlsubmit.images.interpreters import find_python

pytest_plugins = ["support.training_emulator", "support.submit_cli"]
IMAGE_217 = images.tensorflow_image("2.17", "cpu")
IMAGE_311_PY37 = images.tensorflow_image("2.11", "cpu", python="3.7")
# an index that refuses every connection. PIP_RETRIES=1 where pip is given no --retries: pip's default 5 retries of a
# refused connection, with backoff (about 8 s a look-up here), only delay the same answer; one retry keeps the
# warning by which mlsubmit tells an unreachable index from a missing release
OFFLINE = {"PIP_CONFIG_FILE": "/dev/null", "PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_FIND_LINKS": "",
           "PIP_EXTRA_INDEX_URL": "", "PIP_RETRIES": "1"}


def _package(root, requires, code="def main():\n    return 0\n"):
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text("")
    (root / "pkg" / "task.py").write_text(code)
    (root / "setup.py").write_text(f"NAME = 'pkg'\nVERSION = '0.1'\nREQUIRED_PACKAGES = {list(requires)!r}\n")
    return root / "pkg"


def test_syntax_the_images_python_cannot_parse_is_one_line(tmp_path):
    code = tmp_path / "task.py"
    code.write_text("def f(x):\n    match x:\n        case 1:\n            return 1\n")
    with pytest.raises(UsageError, match=r"pkg/task.py line \d+: Pattern matching.*tf-cpu.2-11 runs Python 3.7"):
        image_check.check_syntax([("pkg/task.py", code)], IMAGE_311_PY37)
    assert "feature_version=(3, 10)" in image_check.check_syntax([("pkg/task.py", code)], IMAGE_217)


@pytest.mark.skipif(find_python("3.10") is None, reason="no Python 3.10 interpreter on this machine")
def test_grammar_feature_version_misses_is_caught_by_the_images_interpreter(tmp_path):
    code = tmp_path / "task.py"
    code.write_text("def f(*args: *tuple[int]):\n    pass\n")  # PEP 646 (3.11): ast's feature_version lets it by
    with pytest.raises(UsageError, match=r"pkg/task.py line 1: invalid syntax: tf-cpu.2-17.py310 runs Python 3.10"):
        image_check.check_syntax([("pkg/task.py", code)], IMAGE_217)


def test_a_requirement_that_would_replace_the_images_tensorflow_pins_is_refused_before_upload(cloud, tmp_path):
    package = _package(tmp_path, ["h5py>=3.10", "protobuf<5"])  # the default image: TensorFlow 2.21's protobuf 6+
    run = cloud.run("train", "--package-path", str(package), "--python-module", "pkg.task")
    assert run.code == 2, run.stderr
    assert run.stderr.strip().splitlines()[-1] == (
        "error: requirement protobuf<5 would replace the image's protobuf: tensorflow/tensorflow:2.21.0 carries "
        "tensorflow 2.21.0, which requires protobuf<8.0.0,>=6.31.1; change the requirement in setup.py "
        "(REQUIRED_PACKAGES) to one tensorflow/tensorflow:2.21.0 can take, or run on an image that carries it")
    assert cloud.objects() == [] and cloud.vertex_jobs() == []


def test_train_local_on_the_image_refuses_it_too_before_building_anything(tmp_path):
    package = _package(tmp_path, ["tensorboard>=2.21"])  # a retired image still runs here, with a warning
    done = subprocess.run([sys.executable, "-m", "mlsubmit", "train", "--local", "--package-path", str(package),
                           "--python-module", "pkg.task", "--runtime-version", "2.17"], cwd=tmp_path,
                          capture_output=True, text=True, env={**os.environ, "MLSUBMIT_IMAGE_ENV": "1"}, timeout=300)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "error: requirement tensorboard>=2.21 would replace the image's tensorboard: tf-cpu.2-17.py310 carries " \
           "tensorflow-cpu 2.17.1, which requires tensorboard<2.18,>=2.17" in done.stderr
    assert "building the environment" not in done.stdout and "job " not in done.stdout  # nothing built or started


def test_offline_says_what_was_not_checked_and_a_complete_check_is_cached(tmp_path, monkeypatch):
    package = _package(tmp_path, ["h5py>=3.10"])
    files = [("pkg/task.py", package / "task.py")]
    with monkeypatch.context() as offline:
        offline.setenv("MLSUBMIT_IMAGES", str(tmp_path / "fresh"))
        for key, value in OFFLINE.items():
            offline.setenv(key, value)
        result = image_check.check(["h5py>=3.10"], files, "0" * 64, IMAGE_217)
    (warning,) = result.warnings
    assert warning.startswith("offline: ") and "(h5py>=3.10) were not resolved against tf-cpu.2-17.py310" in warning
    assert result.resolved == () and not result.cached

    digest, edit = uuid.uuid4().hex * 2, uuid.uuid4().hex * 2  # never seen before, whatever earlier runs kept
    first = image_check.check(["h5py>=3.10"], files, digest, IMAGE_217)  # online (or pip's answer kept earlier)
    assert first.warnings == () and dict(first.resolved)["tensorflow-cpu"] == "2.17.1"
    for key, value in OFFLINE.items():
        monkeypatch.setenv(key, value)
    again = image_check.check(["h5py>=3.10"], files, digest, IMAGE_217)  # same sha256 and image: no pip
    assert again.cached and again.resolved == first.resolved

    # an edit (another sha256) with the same requirements: its files are checked again, pip's answer is kept
    edited = image_check.check(["h5py>=3.10"], files, edit, IMAGE_217)  # still offline: no pip
    assert edited.warnings == () and edited.resolved == first.resolved and edited.resolution_cached
    assert "(pip's answer kept for the same requirements and image)" in image_check.describe(edited, IMAGE_217)
    (package / "task.py").write_text("def main(:\n")
    with pytest.raises(UsageError, match="task.py"):
        image_check.check(["h5py>=3.10"], files, "5" * 64, IMAGE_217)
    # a new list goes to pip, which gets no answer offline: said as such, never as "has no release" (a false cause)
    unanswered = image_check.check(["h5py>=3.10", "tabulate"], files[:0], "6" * 64, IMAGE_217)
    (warning,) = unanswered.warnings
    assert "did not answer whether h5py>=3.10 has a release" in warning and unanswered.resolved == (), warning


def test_a_package_with_no_requirements_is_said_to_resolve_with_the_images_packages(tmp_path):
    """Nothing to resolve is not "requirements not resolved" (seen on a tiny package with install_requires=[])."""
    package = _package(tmp_path, [])
    files = [("pkg/task.py", package / "task.py")]
    for requires, digest in (([], "2" * 64), (["mlsubmit-runtime"], "3" * 64)):  # the runtime is staged, not fetched
        result = image_check.check(requires, files, digest, IMAGE_217, staged=("mlsubmit-runtime",))
        assert result.warnings == () and dict(result.resolved)["tensorflow-cpu"] == "2.17.1", result
        assert "resolved by pip with tensorflow-cpu 2.17.1" in image_check.describe(result, IMAGE_217)


def test_offline_before_an_image_environment_exists_is_refused_with_the_cause_and_the_opt_out(tmp_path, monkeypatch):
    from mlsubmit.images import envs as image_env
    from mlsubmit.jobspec.spec import JobSpec

    monkeypatch.setenv("MLSUBMIT_IMAGES", str(tmp_path / "fresh"))
    monkeypatch.setenv("MLSUBMIT_IMAGE_ENV", "1")
    for key, value in OFFLINE.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(UsageError) as refused:  # never silently run on mlsubmit's own TensorFlow
        image_env.runnable_image(JobSpec(runtime_version="2.15", target="local"), lambda text: None)
    line = refused.value.message
    assert line.startswith("the packages of tf-cpu.2-15.py310 could not be looked up on the package index (offline: ")
    assert line.endswith("so tf-cpu.2-15.py310's environment cannot be built here")
    assert "MLSUBMIT_IMAGE_ENV=0" in refused.value.hint
    monkeypatch.setenv("MLSUBMIT_IMAGE_ENV", "0")  # the explicit opt-out
    assert image_env.runnable_image(JobSpec(runtime_version="2.15", target="local"), lambda text: None) is None


def test_the_look_ups_work_with_the_pip_of_python3_m_venv():
    """pip 23 (ensurepip of Python 3.10/3.11) refuses --python-version without --target: the look-ups give it one."""
    import json
    import tempfile

    from mlsubmit.images.envs import foreign_python_args

    pip = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True).stdout
    image = images.tensorflow_image("2.12", "cpu")
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--dry-run", "--no-deps",
                               *foreign_python_args(image, tmp), "--report", f"{tmp}/r.json", "tensorflow-cpu==2.12.*"],
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, pip + done.stderr
        (found,) = json.loads(open(f"{tmp}/r.json").read())["install"]
        assert found["metadata"]["version"].startswith("2.12."), pip
        assert not os.path.exists(f"{tmp}/target") or not os.listdir(f"{tmp}/target")  # a dry run writes nothing


def test_a_retired_image_the_user_names_is_refused_before_anything_is_sent(cloud, tmp_path):
    package = _package(tmp_path, [])
    run = cloud.run("train", "--package-path", str(package), "--python-module", "pkg.task", "--runtime-version",
                    "2.11", "--python-version", "3.7")
    assert run.code == 2, run.stderr
    assert run.stderr.strip().splitlines() == [
        "error: tf-cpu.2-11 is no longer served by Vertex AI: its end of availability was 2024-11-15 (by Google's "
        "'Supported frameworks' table); use tensorflow/tensorflow:2.21.0 (tensorflow 2.21, Python 3.11; mlsubmit runs "
        "your package on it as a custom container): --runtime-version 2.21 or --executor-image "
        "tensorflow/tensorflow:2.21.0"]
    assert cloud.objects() == [] and cloud.vertex_jobs() == []


# -- the true cause, every time ------------------------------------------------------------------------------------
def test_a_pin_with_no_release_for_the_images_python_is_named_as_such():
    """numpy 1.22.3 needs Python 3.8: the cause is said from what the index answers, never guessed when it is slow
    (an unanswered look-up was once read as "it has a release" and became a false conflict with TensorFlow's pins)."""
    with pytest.raises(UsageError, match=r"^requirement numpy==1\.22\.3 has no release for Python 3\.7, which "
                                         r"tf-cpu\.2-8 runs"):
        image_check.resolve(["numpy==1.22.3"], images.tensorflow_image("2.8", "cpu", python="3.7"))


def test_a_pin_with_only_a_source_distribution_for_the_images_python_is_said_before_any_build():
    """pandas 1.4.1 has wheels up to Python 3.10: on Python 3.11 pip would build it from source at every job start
    (190 s, then fail): one early line, before anything is built."""
    _, warnings = image_check.resolve(["pandas==1.4.1"], images.find("tensorflow/tensorflow:2.21.0"))
    assert len(warnings) == 1 and warnings[0].startswith(
        "pandas==1.4.1 has no wheel for Python 3.11, only a source distribution: pip builds it from source at every "
        "start of the job on tensorflow/tensorflow:2.21.0"), warnings


@pytest.mark.parametrize("files, said", [
    ({"pyproject.toml": "[project]\nname = 'pkg'\nversion = '0.1'\ndependencies = ['protobuf<5']\n"},
     "pyproject.toml ([project] dependencies)"),
    ({"requirements.txt": "protobuf<5\n"}, "requirements.txt"),
    ({"setup.py": "from setuptools import setup\nsetup(name='pkg', install_requires=open('requirements.txt').read()"
                  ".split())\n", "requirements.txt": "protobuf<5\n"}, "requirements.txt (which setup.py reads)"),
    ({"setup.py": "from setuptools import setup\nsetup(name='pkg', install_requires=['protobuf<5'])\n"},
     "setup.py (install_requires)"),
    ({"setup.py": "from setuptools import setup\n\nREQUIRED_PACKAGES = ['protobuf<5']\n"
                  "setup(name='pkg', install_requires=REQUIRED_PACKAGES)\n"}, "setup.py (REQUIRED_PACKAGES)"),
    ({"setup.py": "from setuptools import setup\nsetup()\n",  # a shim: the requirements are in pyproject.toml
      "pyproject.toml": "[project]\nname = 'pkg'\nversion = '0.1'\ndependencies = ['protobuf<5']\n"},
     "pyproject.toml ([project] dependencies)"),
    ({"setup.py": "from setuptools import setup\nsetup()\n",
      "setup.cfg": "[metadata]\nname = pkg\n\n[options]\ninstall_requires =\n    protobuf<5\n"},
     "setup.cfg ([options] install_requires)"),
])
def test_a_conflict_is_advised_where_the_package_declares_its_requirements(tmp_path, files, said):
    """Where each layout declares its requirements, read from its files (no pip): the advice of pip's refusal names
    it, as test_a_requirement_that_would_replace_the_images_tensorflow_pins_is_refused_before_upload sees end to end
    (`mlsubmit train`, pip's resolver, "change the requirement in setup.py (REQUIRED_PACKAGES)")."""
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert image_check.declared_in(tmp_path) == said
