"""The table of APIs Keras, TensorFlow and scikit-learn removed (mlsubmit.images.removed): read from source with ast,
never imported, and judged against the version the image carries."""

from __future__ import annotations

import pytest

from mlsubmit.images.removed import REMOVED, find_removed

SKLEARN_020 = {"scikit-learn": "0.20.4", "tensorflow-cpu": "1.15.5", "keras": "2.2.4"}
SKLEARN_16 = {"scikit-learn": "1.6.1"}
TF_28 = {"tensorflow-cpu": "2.8.4", "keras": "2.8.0"}
TF_221 = {"tensorflow": "2.21.0", "keras": "3.12.0"}


@pytest.mark.parametrize("source, versions, named", [
    ("from sklearn.externals import joblib\n", SKLEARN_16, "sklearn.externals.joblib"),
    ("import sklearn.externals.joblib as joblib\n", SKLEARN_16, "sklearn.externals.joblib"),
    ("from sklearn.cross_validation import train_test_split\n", SKLEARN_16, "sklearn.cross_validation"),
    ("from sklearn import grid_search\n", SKLEARN_16, "sklearn.grid_search"),
    ("from sklearn.datasets import load_boston\n", SKLEARN_16, "sklearn.datasets.load_boston"),
    ("import tensorflow as tf\nlayer = tf.contrib.layers.fully_connected\n", TF_28, "tensorflow.contrib"),
    ("from keras.utils import multi_gpu_model\n", TF_221, "keras.utils.multi_gpu_model"),
    ("from tensorflow import keras\nwrap = keras.wrappers.scikit_learn.KerasClassifier\n", TF_221,
     "tensorflow.keras.wrappers.scikit_learn"),
    ("import tensorflow as tf\nrun = tf.estimator.train_and_evaluate\n", TF_221, "tensorflow.estimator"),
    ("from tensorflow.keras.layers.experimental import preprocessing\n", TF_221,
     "tensorflow.keras.layers.experimental.preprocessing"),
])
def test_a_removed_api_is_named_on_an_image_whose_release_lacks_it(tmp_path, source, versions, named):
    (tmp_path / "model.py").write_text("import os\n\n" + source)
    use = find_removed([("trainer/model.py", tmp_path / "model.py")], versions)
    line = 2 + source.count("\n")  # the source's last line
    assert use is not None and use.written == named and use.line == line
    said = use.message("the-image")
    assert said.startswith(f"trainer/model.py line {line}: {named} is not in {use.removed.distribution} ")
    assert f"removed it; {use.removed.instead} replaces it (release notes: http" in said


@pytest.mark.parametrize("source, versions", [
    ("from sklearn.externals import joblib\n", SKLEARN_020),  # the release it was written for still had it
    ("from tensorflow.keras.layers.experimental import preprocessing\n", TF_28),
    ("try:\n    from sklearn.externals import joblib\nexcept ImportError:\n    import joblib\n", SKLEARN_16),
    ("import joblib\nfrom sklearn.model_selection import train_test_split\n", SKLEARN_16),
    ("import tensorflow as tf\nlayer = tf.keras.layers.Dense\n", TF_221),
    ("from sklearn.externals import joblib\n", TF_221),  # no scikit-learn on the image: nothing to judge against
])
def test_what_the_release_still_has_or_code_that_guards_the_import_passes(tmp_path, source, versions):
    (tmp_path / "task.py").write_text(source)
    assert find_removed([("trainer/task.py", tmp_path / "task.py")], versions) is None


def test_every_entry_cites_the_release_notes_that_say_so():
    assert all(entry.source.startswith("https://") and entry.instead for entry in REMOVED)
    assert len({entry.path for entry in REMOVED}) == len(REMOVED)
