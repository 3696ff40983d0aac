"""mlsubmit predict of models Keras loads but cannot rebuild (#38): one line naming the model and the fix, exit 2.

Real Keras 3 models saved here: a Sequential model saved before it was built (no input shape in the file), Lambda
layers whose stored code needs a name of the code that saved them (failing on load, while Keras rebuilds the model,
or only on the first batch), and a subclassed model, whose class this process has registered as the training code's
import would (so it loads: the signature is traced from the input shape it was saved with).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from mlsubmit.cli import app
from tests.support.one_line import refused

runner = CliRunner()
pytestmark = pytest.mark.slow  # imports TensorFlow


def _double(t):  # a name of the "training code": not in scope where Keras runs a Lambda's stored code
    return t * 2.0


@pytest.fixture(scope="module")
def keras():
    import keras

    return keras


@pytest.fixture(scope="module")
def subclassed(keras):
    @keras.saving.register_keras_serializable(package="test_predict_rebuild")
    class Classifier(keras.Model):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.head = keras.layers.Dense(3, activation="softmax")

        def call(self, x):
            return self.head(x)

    return Classifier


@pytest.fixture(scope="module")
def models(keras, subclassed, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("rebuild")
    keras.utils.set_random_seed(0)
    softmax = keras.layers.Dense(3, activation="softmax")

    def functional(lambda_layer) -> object:
        inputs = keras.Input((4,))
        return keras.Model(inputs, keras.layers.Dense(3, activation="softmax")(lambda_layer(inputs)))

    built = subclassed()
    built(np.zeros((1, 4), "float32"))
    made = {
        "unbuilt": keras.Sequential([keras.layers.Dense(8), softmax]),
        "unbuilt_subclassed": subclassed(),
        "lambda_sequential": keras.Sequential([keras.Input((4,)), keras.layers.Lambda(lambda t: _double(t)),
                                               keras.layers.Dense(3, activation="softmax")]),
        "lambda_functional": functional(keras.layers.Lambda(lambda t: _double(t))),
        "lambda_first_batch": functional(keras.layers.Lambda(lambda t: _double(t), output_shape=(4,))),
        "subclassed": built,
    }
    paths = {}
    with pytest.warns(UserWarning, match="not yet been built"):
        for name in ("unbuilt", "unbuilt_subclassed"):
            made[name].save(root / f"{name}.keras")
    for name, model in made.items():
        paths[name] = root / f"{name}.keras"
        if not paths[name].exists():
            model.save(paths[name])
    np.save(root / "x.npy", np.random.default_rng(0).random((5, 4), dtype=np.float32))
    paths["x"] = root / "x.npy"
    paths["expected"] = built.predict_on_batch(np.load(root / "x.npy"))
    return paths


def _predict(models, name: str, *args: str):
    return runner.invoke(app, ["predict", str(models[name]), "--input", str(models["x"]), *args])


@pytest.mark.parametrize("name, kind", [("unbuilt", "Sequential"), ("unbuilt_subclassed", "Classifier")])
def test_a_model_saved_before_it_was_built_is_one_line_naming_the_fix(models, name, kind):
    refused(_predict(models, name),
            f"invalid value for MODEL: {models[name]} holds a {kind} model saved before it was built: the file records "
            "no input shape", "begin it with keras.Input(shape=…) (or call it once on a batch), then save it again")


def test_a_lambda_keras_cannot_rebuild_names_the_layer_and_the_missing_name_with_unsafe(models):
    refused(_predict(models, "lambda_sequential"), "contains a Lambda layer", "--unsafe")  # safe mode first
    refused(_predict(models, "lambda_sequential", "--unsafe"),
            f"Keras cannot rebuild {models['lambda_sequential']}: layer Lambda ('lambda", "fails on the input shape the model "
            "was saved with, (None, 4) (NameError: name '_double' is not defined)", "write it with keras.ops")
    refused(_predict(models, "lambda_functional", "--unsafe"),
            f"{models['lambda_functional']} (its training backend not recorded) does not load under tensorflow: layer "
            "Lambda ('lambda", "its stored code fails (NameError: name '_double' is not defined)",
            "write it with keras.ops")


def test_a_lambda_that_fails_only_on_the_first_batch_is_one_line_and_writes_nothing(models, tmp_path):
    out = tmp_path / "p.csv"
    refused(_predict(models, "lambda_first_batch", "--unsafe", "-o", str(out)),
            f"invalid value for MODEL: {models['lambda_first_batch']} loads but fails to predict (NameError: name '_double' "
            "is not defined)", "write it with keras.ops")
    assert list(tmp_path.iterdir()) == []


def test_a_built_subclassed_model_predicts_from_the_input_shape_it_was_saved_with(models, tmp_path):
    out = tmp_path / "p.npz"
    result = _predict(models, "subclassed", "-o", str(out))
    assert result.exit_code == 0, result.output
    with np.load(out) as saved:
        np.testing.assert_allclose(saved["probabilities"], models["expected"], atol=1e-6)
