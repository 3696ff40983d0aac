"""APIs that trainers of their time imported and later releases of Keras, TensorFlow or scikit-learn removed.

A trainer written for an old image (`from sklearn.externals import joblib` on runtime 1.15) fails at start on a newer
one. The table below says which import path went away in which release, what replaces it, and where the library's own
notes say so. `find_removed` reads a package's files with `ast` (nothing is imported or run) and judges each use
against the version of that library the image carries (or that pip chose for the job's requirements), so a use is
named before anything is uploaded, and only where the image really lacks it.

What counts as a use: an `import` or `from … import` of the path or below it, and an attribute chain through an
imported name (`import tensorflow as tf` … `tf.contrib.layers`), anywhere in the file but inside a `try:` block (the
`try: from sklearn.externals import joblib / except ImportError: import joblib` pattern is how code kept working).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Removed:
    """An import path gone from `distribution` since release `since`; what replaces it; the release note saying so."""

    path: str
    distribution: str
    since: tuple[int, int]
    instead: str
    source: str

    @property
    def release(self) -> str:
        return ".".join(map(str, self.since))


_SKLEARN_021 = "https://scikit-learn.org/stable/whats_new/v0.21.html (deprecated in 0.21, removed in 0.23)"
_SKLEARN_018 = "https://scikit-learn.org/0.18/whats_new.html (deprecated in 0.18, removed in 0.20)"
_SKLEARN_12 = "https://scikit-learn.org/1.2/whats_new/v1.2.html"
_TF_20 = "https://github.com/tensorflow/tensorflow/releases/tag/v2.0.0 (tf.contrib sunset RFC, tensorflow/community#18)"
_TF_24 = "https://github.com/tensorflow/tensorflow/releases/tag/v2.4.0"
_TF_213 = ("https://github.com/tensorflow/tensorflow/releases/tag/v2.13.0 (the Keras scikit-learn wrappers, "
           "deprecated in August 2021, were removed)")
_TF_216 = "https://github.com/tensorflow/tensorflow/releases/tag/v2.16.1 (tf.estimator removed; Keras 3 the default)"
_KERAS_3 = "https://keras.io/keras_3 (Keras 3 has no layers.experimental; tensorflow/tensorflow#64349)"
_MIRRORED = "tf.distribute.MirroredStrategy"
_SCIKERAS = "scikeras.wrappers (KerasClassifier, KerasRegressor)"
_PREPROCESSING = "keras.layers (the same layers: keras.layers.Normalization, Rescaling, …)"

REMOVED: tuple[Removed, ...] = (
    Removed("sklearn.externals.joblib", "scikit-learn", (0, 23), "import joblib", _SKLEARN_021),
    Removed("sklearn.externals.six", "scikit-learn", (0, 23), "import six", _SKLEARN_021),
    Removed("sklearn.cross_validation", "scikit-learn", (0, 20), "sklearn.model_selection", _SKLEARN_018),
    Removed("sklearn.grid_search", "scikit-learn", (0, 20), "sklearn.model_selection", _SKLEARN_018),
    Removed("sklearn.learning_curve", "scikit-learn", (0, 20), "sklearn.model_selection", _SKLEARN_018),
    Removed("sklearn.datasets.load_boston", "scikit-learn", (1, 2), "another data set (fetch_openml, "
            "load_diabetes)", _SKLEARN_12),
    Removed("sklearn.metrics.plot_confusion_matrix", "scikit-learn", (1, 2),
            "sklearn.metrics.ConfusionMatrixDisplay.from_estimator", _SKLEARN_12),
    Removed("tensorflow.contrib", "tensorflow", (2, 0), "tf.keras, TensorFlow Addons or tf.compat.v1 (per symbol)",
            _TF_20),
    Removed("keras.utils.multi_gpu_model", "tensorflow", (2, 4), _MIRRORED, _TF_24),
    Removed("tensorflow.keras.utils.multi_gpu_model", "tensorflow", (2, 4), _MIRRORED, _TF_24),
    Removed("tensorflow.keras.wrappers.scikit_learn", "tensorflow", (2, 13), _SCIKERAS, _TF_213),
    Removed("keras.wrappers.scikit_learn", "keras", (2, 13), _SCIKERAS, _TF_213),
    Removed("tensorflow.estimator", "tensorflow", (2, 16), "Keras (or TensorFlow 2.15 and earlier)", _TF_216),
    Removed("tensorflow.keras.layers.experimental.preprocessing", "keras", (3, 0), _PREPROCESSING, _KERAS_3),
    Removed("keras.layers.experimental.preprocessing", "keras", (3, 0), _PREPROCESSING, _KERAS_3),
)

# the distributions that carry a library, by the name the table uses
_CARRIERS = {"tensorflow": ("tensorflow", "tensorflow-cpu", "tensorflow-gpu"), "keras": ("keras",),
             "scikit-learn": ("scikit-learn",)}


@dataclass(frozen=True)
class Use:
    """A removed API used by a file: where, the path as written resolved through its imports, the table's entry,
    and the version the image carries."""

    file: str
    line: int
    written: str
    removed: Removed
    version: str

    def message(self, image: str | None = None) -> str:
        entry = self.removed
        holds = f"{image} carries" if image else "the environment holds"
        return (f"{self.file} line {self.line}: {self.written} is not in {entry.distribution} {self.version}, which "
                f"{holds}: {entry.distribution} {entry.release} removed it; {entry.instead} replaces it "
                f"(release notes: {entry.source})")


def distributions() -> list[str]:
    """Every distribution name whose version the table's judgement needs."""
    return sorted({name for entry in REMOVED for name in _CARRIERS.get(entry.distribution, (entry.distribution,))})


def _version(versions: Mapping[str, str], distribution: str) -> tuple[str, tuple[int, ...]] | None:
    from packaging.version import InvalidVersion, Version

    for name in _CARRIERS.get(distribution, (distribution,)):
        if name in versions:
            try:
                return versions[name], Version(versions[name]).release
            except InvalidVersion:
                return None
    return None


def _guarded(tree: ast.AST) -> set[int]:
    """ids of the nodes inside a `try:` body (code that already handles the import failing)."""
    inside = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try):
            for statement in node.body:
                inside.update(id(child) for child in ast.walk(statement))
    return inside


def _references(tree: ast.AST) -> Iterable[tuple[int, str]]:
    """(line, dotted path) of every import and every attribute chain through an imported name, resolved to the
    imported module's path (`tf.contrib.layers` → `tensorflow.contrib.layers`), outside `try:` bodies."""
    guarded = _guarded(tree)
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        if id(node) in guarded:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else \
                    alias.name.split(".")[0]
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                yield node.lineno, f"{node.module}.{alias.name}"
    for node in ast.walk(tree):
        if id(node) in guarded or not isinstance(node, ast.Attribute):
            continue
        parts = []
        current: ast.AST = node
        while isinstance(current, ast.Attribute):
            parts.append(current.attr)
            current = current.value
        if isinstance(current, ast.Name) and current.id in names:
            yield node.lineno, ".".join([names[current.id], *reversed(parts)])


def find_removed(files: Iterable[tuple[str, Path]], versions: Mapping[str, str]) -> Use | None:
    """The first use, in `files` ((name in the package, path) pairs), of an API the table says is gone from the
    version `versions` (distribution name → version) holds; None when there is none, or a file does not parse
    (the syntax check names that)."""
    for name, path in files:
        if not name.endswith(".py"):
            continue
        try:
            tree = ast.parse(Path(path).read_bytes(), name)
        except (SyntaxError, ValueError):
            continue
        for line, dotted in sorted(set(_references(tree))):
            for entry in REMOVED:
                if dotted != entry.path and not dotted.startswith(entry.path + "."):
                    continue
                carried = _version(versions, entry.distribution)
                if carried is not None and carried[1][:2] >= entry.since:
                    return Use(name, line, entry.path, entry, carried[0])
    return None
