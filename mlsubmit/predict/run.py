"""One `mlsubmit predict` run: verify and fetch the models, check everything, then predict batch by batch.

Every check that needs no prediction happens first (flags, input header, labels, manifests, weights, model
agreement, input shape), so bad input fails before an output file is opened; the output appears only when the
last batch is written. The library never prints: progress goes to an optional callback, and the caller renders
the returned `PredictResult`.
"""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mlsubmit.errors import OperationFailed, UsageError
from mlsubmit.predict.backend import activate, keras_imported_under, version_of
from mlsubmit.predict import inputs as input_files
from mlsubmit.predict.cache import Cache
from mlsubmit.predict.ensemble import MemberWeight, combine, member_weights
from mlsubmit.predict.members import check_probabilities, load_members
from mlsubmit.predict.outputs import PredictionWriter, confusion_path, confusion_png
from mlsubmit.predict.request import PredictRequest, auto_batch_size, default_cache_dir
from mlsubmit.predict.sources import resolve_all

HEAD_ROWS = 5
ENSEMBLE = "ensemble"


@dataclass(frozen=True)
class MemberResult:
    name: str
    kind: str  # "job dir" or "model file"
    weight: MemberWeight
    accuracy: float | None  # on --labels
    backend: str | None = None  # the Keras backend it was trained under, from its metrics.json (None: not recorded)
    backend_version: str | None = None

    @property
    def trained_under(self) -> str | None:
        return " ".join(filter(None, (self.backend, self.backend_version))) or None


@dataclass(frozen=True)
class HeadRow:
    id: str
    predicted: int
    probability: float
    label: int | None


@dataclass(frozen=True)
class PredictResult:
    rows: int
    classes: int
    input: str
    members: list[MemberResult]
    ensemble_accuracy: float | None
    head: list[HeadRow]
    labels: str | None  # where the labels came from
    id_column: str = "row"  # "row" (arrays: rows are numbered) or "file" (images)
    files: list[Path] = field(default_factory=list)  # output and confusion-matrix PNG, when written
    downloaded: int = 0
    reused: int = 0
    backend: str = "tensorflow"  # the Keras backend every member predicted under, in this process
    backend_version: str = ""
    keras_version: str = ""

    @property
    def predicted_under(self) -> str:
        keras = f" (Keras {self.keras_version})" if self.keras_version else ""
        return " ".join(filter(None, (self.backend, self.backend_version))) + keras


def _stream(batch_size, source, input_shape, members, weights, labels, writer, on_progress):
    """Predict batch by batch; write rows; count (label, prediction) pairs per member and for the ensemble."""
    classes = members[0].num_classes
    matrices = np.zeros((len(members) + 1, classes, classes), dtype=np.int64) if labels is not None else None
    head: list[HeadRow] = []
    start = 0
    for x in source.batches(batch_size, input_shape):
        member_probabilities = [m.predict(x) for m in members]
        if start == 0:
            for member, p in zip(members, member_probabilities):
                check_probabilities(member, p)
        ensemble = combine(member_probabilities, weights)
        predicted = ensemble.argmax(axis=1)
        batch_labels = labels[start:start + len(x)] if labels is not None else None
        if writer:
            writer.add(start, ensemble, batch_labels)
        if matrices is not None:
            for i, p in enumerate(member_probabilities):
                np.add.at(matrices[i], (batch_labels, p.argmax(axis=1)), 1)
            np.add.at(matrices[-1], (batch_labels, predicted), 1)
        for i in range(min(len(x), HEAD_ROWS - len(head))):
            head.append(HeadRow(source.ids[start + i] if source.ids else str(start + i), int(predicted[i]),
                                float(ensemble[i, predicted[i]]),
                                int(batch_labels[i]) if batch_labels is not None else None))
        start += len(x)
        if on_progress:
            on_progress(start, source.count)
    return head, matrices


def predict(request: PredictRequest, on_progress: Callable[[int, int], None] | None = None) -> PredictResult:
    """Run the request; returns what happened for the caller to render.

    Raises:
        UsageError: bad input of any kind (nothing is written).
        OperationFailed: a download that failed.
    """
    activate(request.backend)  # before anything imports Keras: its backend is fixed on the first import
    source = input_files.open_input(request.inputs, request.input_key)
    labels, labels_from = input_files.load_labels(request.labels, source) if request.labels else (None, None)
    cache = Cache(request.cache_dir or default_cache_dir())
    sources = resolve_all(request.models, cache)
    weights = member_weights(request.weights, sources)
    members, input_shape, classes = load_members(sources, request.unsafe, request.backend)
    backend = keras_imported_under() or request.backend  # what predicts, as Keras says (tf_keras: tensorflow)
    source.check(input_shape)
    if labels is not None and labels.max(initial=0) >= classes:
        raise UsageError(f"invalid value for --labels: {labels_from} has label {int(labels.max())}, but the models "
                         f"predict {classes} classes (0 … {classes - 1})")

    weight_values = [w.value for w in weights]
    writer = None
    try:
        if request.output:
            writer = PredictionWriter(request.output, rows=source.count, classes=classes, ids=source.ids,
                                      with_labels=labels is not None, members=[s.name for s in sources],
                                      weights=weight_values, backend=backend,
                                      member_backends=[s.backend for s in sources])
        with writer or nullcontext():
            batch_size = request.batch_size or auto_batch_size(input_shape)
            head, matrices = _stream(batch_size, source, input_shape, members, weight_values, labels,
                                     writer, on_progress)
            accuracies = [float(np.trace(m) / m.sum()) for m in matrices] if matrices is not None else None
            files = []
            if writer:
                if matrices is not None:
                    title = f"ensemble of {len(members)}: accuracy {accuracies[-1]:.4f} on {source.count} rows"
                    confusion_png(matrices[-1], writer.companion(confusion_path(request.output)), title)
                files = writer.commit()
    except (zipfile.BadZipFile, zlib.error) as exc:  # a damaged .npz, found mid-way
        raise UsageError(f"invalid input {source.description}: the file is damaged ({type(exc).__name__}: {exc}); "
                         "no output was written", hint="write the input again") from None
    except OSError as exc:  # a disk that filled up, a file that vanished
        raise OperationFailed(f"prediction stopped: {type(exc).__name__}: {exc}; no output was written") from None

    results = [MemberResult(s.name, s.kind, w, accuracies[i] if accuracies else None, s.backend, s.backend_version)
               for i, (s, w) in enumerate(zip(sources, weights))]
    import keras  # already imported by load_members, under `backend`
    return PredictResult(rows=source.count, classes=classes, input=source.description, members=results,
                         ensemble_accuracy=accuracies[-1] if accuracies else None, head=head, labels=labels_from,
                         id_column="file" if source.ids else "row", files=files,
                         downloaded=len(cache.downloaded), reused=len(cache.reused), backend=backend,
                         backend_version=version_of(backend), keras_version=keras.__version__)
