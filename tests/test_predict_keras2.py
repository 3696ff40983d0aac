"""`mlsubmit predict` installed into a user's venv that already holds TensorFlow 2.8 with Keras 2.8 (#37).

The venv is the user's own, made on top of the tf-cpu.2-8 image environment the suite builds (and keeps, read-only
here): a `python -m venv --without-pip` of that environment's Python whose site-packages name the environment's in a
.pth file, so TensorFlow 2.8.4, Keras 2.8, numpy 1.23 and protobuf 3.19 are installed there as in any project venv.
mlsubmit's wheel goes in with its `predict` extra by the pip of a stock `python3.10 -m venv` (pip 23.0.1), with the
venv's own packages as constraints — the install line for a project venv: without them pip's resolver, which does
not weigh what is installed, takes the newest Google client libraries and lifts protobuf to 6+, which TensorFlow
2.8 cannot import. Then, as the user would run it:

- a model Keras 2.8 saved as .h5 predicts, on TensorFlow 2.8 and Keras 2.8, what Keras 2.8 itself predicts;
- a Keras 3 .keras file, and the .h5 Keras 3 writes (the trainer's model.h5: its InputLayer has Keras 3's
  `batch_shape`, which no Keras 2 reads), are one line naming the Keras that saved it and the one found, exit 2;
- a Keras 2 .h5 holding a Lambda layer is refused without --unsafe (Keras 2 has no safe mode: mlsubmit checks);
- where protobuf was lifted (the install without constraints), TensorFlow 2.8 fails to import: one line naming the
  requirement it does not meet and the pip command that restores it.

Heavy: the install resolves and unpacks the core's dependencies and matplotlib (about a minute on 2 cores; the
image environment, built once, takes minutes more).
"""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from support.built_wheel import PIP_QUIET, mlsubmit_wheel
from support.engine_clusters import stock_python

pytestmark = pytest.mark.slow
KERAS2_MODELS = """
import sys
import numpy as np, tensorflow as tf
from tensorflow import keras
tf.random.set_seed(0)
def model(lambda_layer):
    inputs = keras.Input((8, 8, 1))
    x = keras.layers.Flatten()(inputs)
    if lambda_layer:
        x = keras.layers.Lambda(lambda t: t * 2.0)(x)
    return keras.Model(inputs, keras.layers.Dense(10, activation="softmax")(x))
plain = model(False)
plain.save(sys.argv[1] + "/keras2.h5")
model(True).save(sys.argv[1] + "/keras2_lambda.h5")
x = np.random.default_rng(0).random((7, 8, 8, 1), dtype=np.float32)
np.save(sys.argv[1] + "/x.npy", x)
np.save(sys.argv[1] + "/expected.npy", plain.predict_on_batch(x))
"""


@dataclass(frozen=True)
class UserVenv:
    python: Path
    env_python: Path  # the TensorFlow 2.8 environment under it
    env_packages: dict[str, str]  # what that environment holds: name -> version
    models: Path
    pip: list  # the user's pip (23.0.1), run as `pip --python VENV`


def _run(argv: list, *, timeout: float = 300, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=timeout, **kwargs)


def _frozen(site: Path) -> dict[str, str]:
    """What an environment holds, name -> version, from its site-packages' .dist-info folders: what `pip freeze`
    reads (without a pip process started twice, in the user's interpreter and the environment's, 2 CPU-s a look)."""
    return {info.name[:-len(".dist-info")].rpartition("-")[0].lower().replace("_", "-"):
            info.name[:-len(".dist-info")].rpartition("-")[2] for info in site.glob("*.dist-info")}


def _site_packages(python: Path) -> Path:
    done = _run([python, "-I", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"])
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip())


def _keras3_model(folder: Path) -> None:
    """A Keras 3 model saved by the suite's Keras, in this process (whose Keras the suite has imported already or
    soon will: a process of its own would start TensorFlow once more)."""
    import keras

    inputs = keras.Input((8, 8, 1))
    model = keras.Model(inputs, keras.layers.Dense(10, activation="softmax")(keras.layers.Flatten()(inputs)))
    model.save(str(folder / "keras3.keras"))
    model.save(str(folder / "keras3.h5"))  # as the trainer writes model.h5 beside model.keras


def _models(env_python: Path, folder: Path) -> None:
    """The Keras 2.8 models, saved by the environment's own Keras, and a Keras 3 one saved by the suite's."""
    # -B: no bytecode of the modules TensorFlow 2.8's autograph writes to the temporary folder (-I ignores
    # PYTHONDONTWRITEBYTECODE), which it would leave there
    keras2 = subprocess.Popen([env_python, "-I", "-B", "-c", KERAS2_MODELS, folder], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    try:
        _keras3_model(folder)
    finally:
        _, err = keras2.communicate(timeout=300)
    assert keras2.returncode == 0, err[-3000:]


@pytest.fixture(scope="module")
def user_venv(tmp_path_factory, images_home) -> UserVenv:
    from mlsubmit.images import catalog
    from mlsubmit.images.envs import image_python

    stock = stock_python("3.10")
    if stock is None:
        pytest.skip("no stock CPython 3.10 (pyenv) on this machine: the user's pip comes from its venv")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLSUBMIT_IMAGES", str(images_home))
        env_python, _ = image_python(catalog.tensorflow_image("2.8"))
    root = tmp_path_factory.mktemp("keras2-user")
    wheel = mlsubmit_wheel()
    assert _run([stock.path, "-m", "venv", root / "pip"]).returncode == 0
    pip = [root / "pip" / "bin" / "python", "-m", "pip"]
    env_site = _site_packages(env_python)
    held = _frozen(env_site)
    assert (held["tensorflow-cpu"], held["keras"], held["protobuf"][:2]) == ("2.8.4", "2.8.0", "3."), held
    # TensorFlow 2.8's metadata says numpy>=1.20 only, and numpy 2 broke its `import tensorflow`: the image's table
    # caps numpy below 1.24 (the environment imports TensorFlow 2.8 below, where the Keras 2.8 models are saved)
    assert env_python.is_relative_to(images_home / "tf-cpu.2-8.py310"), env_python
    assert held["numpy"].startswith("1.") and int(held["numpy"].split(".")[1]) < 24, held

    user = root / "venv"
    assert _run([env_python, "-m", "venv", "--without-pip", user]).returncode == 0
    (_site_packages(user / "bin" / "python") / "tensorflow_2_8.pth").write_text(f"{env_site}\n")
    constraints = root / "constraints.txt"
    constraints.write_text("".join(f"{name}=={version}\n" for name, version in held.items()))
    (root / "models").mkdir()
    with ThreadPoolExecutor(max_workers=2) as pool:  # the install waits on the index, the models on TensorFlow
        install = pool.submit(_run, [*pip, "--python", user / "bin" / "python", "install", *PIP_QUIET, "-q",
                                     f"{wheel}[predict]", "-c", constraints], timeout=600)
        _models(env_python, root / "models")
        done = install.result()
    assert done.returncode == 0, done.stderr[-3000:]
    assert _frozen(env_site) == held  # the environment under the venv is as it was
    return UserVenv(user / "bin" / "python", env_python, held, root / "models", pip)


def _predict(venv: UserVenv, model: str, *args: str) -> subprocess.CompletedProcess:
    return _run([venv.python.parent / "mlsubmit", "predict", venv.models / model, "--input", venv.models / "x.npy",
                 *args], cwd=venv.models, env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"})


def test_the_install_brings_none_of_the_frameworks_packages_into_the_venv(user_venv):
    installed = {path.name.split("-")[0].lower().replace("_", "-")
                 for path in _site_packages(user_venv.python).glob("*.dist-info")}
    assert "mlsubmit" in installed and "matplotlib" in installed, installed
    assert not installed & set(user_venv.env_packages), installed & set(user_venv.env_packages)


def test_keras2_models_predict_on_keras2_and_a_keras3_file_or_a_lambda_is_one_line(user_venv):
    out = user_venv.models / "p.npz"
    with ThreadPoolExecutor(max_workers=3) as pool:  # each imports TensorFlow 2.8: side by side
        plain, keras3, keras3_h5 = pool.map(lambda args: _predict(user_venv, *args),
                                            [("keras2.h5", "-o", str(out)), ("keras3.keras",), ("keras3.h5",)])
        lambda_refused = _predict(user_venv, "keras2_lambda.h5")  # refused from the file: TensorFlow not imported
    assert plain.returncode == 0, plain.stdout[-2000:] + plain.stderr[-3000:]
    assert plain.stderr == "", plain.stderr  # nothing of TensorFlow 2.8's or its Google clients' start-up
    assert "predicted under tensorflow 2.8.4 (Keras 2.8.0)" in plain.stdout, plain.stdout
    with np.load(out) as written:
        np.testing.assert_allclose(written["probabilities"], np.load(user_venv.models / "expected.npy"), atol=1e-6)

    for refused, needles in ((keras3, ("keras3.keras was saved by Keras 3.", "Keras 2.8.0 (found here) cannot load",
                                       "pipx install 'mlsubmit[tensorflow]'")),
                             (keras3_h5, ("keras3.h5 was saved by Keras 3.", "Keras 2.8.0 (found here) cannot load",
                                          "batch_shape")),
                             (lambda_refused, ("keras2_lambda.h5 contains a Lambda layer", "arbitrary code",
                                               "pass --unsafe only if you trust"))):
        assert refused.returncode == 2 and refused.stdout == "", refused.stdout + refused.stderr
        assert refused.stderr.count("\n") == 1 and refused.stderr.startswith("error: "), refused.stderr
        assert all(needle in refused.stderr for needle in needles), refused.stderr


def test_a_tensorflow_broken_by_a_lifted_protobuf_is_one_line_naming_the_pin(user_venv, tmp_path):
    """What pip's resolver does without constraints (lift protobuf over TensorFlow 2.8's pin into the user's venv),
    done here by the same pip into a venv layered on the user's: mlsubmit and the framework below, protobuf 6+ on top."""
    lifted = tmp_path / "lifted"
    assert _run([user_venv.env_python, "-m", "venv", "--without-pip", lifted]).returncode == 0
    site = _site_packages(lifted / "bin" / "python")
    (site / "a_user.pth").write_text(f"{_site_packages(user_venv.python)}\n")
    (site / "b_tensorflow_2_8.pth").write_text(f"{_site_packages(user_venv.env_python)}\n")
    done = _run([*user_venv.pip, "--python", lifted / "bin" / "python", "install", *PIP_QUIET, "-q", "--no-deps",
                 "protobuf>=6.33.5"])
    assert done.returncode == 0, done.stderr[-3000:]
    run = _run([lifted / "bin" / "python", "-m", "mlsubmit", "predict", user_venv.models / "keras2.h5", "--input",
                user_venv.models / "x.npy"], cwd=tmp_path)
    assert run.returncode == 2 and run.stdout == "", run.stdout + run.stderr
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("error: TensorFlow 2.8.4 found here ("), run.stderr
    assert "fails to import (TypeError: Descriptors cannot be created directly" in run.stderr, run.stderr
    assert "it requires protobuf<3.20,>=3.9.2 (" in run.stderr, run.stderr
    assert "pip install 'mlsubmit[predict]' 'protobuf<3.20,>=3.9.2'" in run.stderr, run.stderr
