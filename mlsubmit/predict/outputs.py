"""The predictions file (CSV, or .npz / JSON by extension) and the confusion-matrix PNG, written atomically.

Rows are written batch by batch as they are predicted, to temporary files beside the outputs; only when every batch
is written are they renamed into place. On any error (or Ctrl-C) the temporary files are removed, so a failed run
never leaves a partial output behind. The .npz arrays are filled through memory maps, so no format holds all rows
in memory.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np


def confusion_path(output: Path) -> Path:
    """Where the confusion matrix goes: next to the output, `preds.csv` → `preds.confusion.png`."""
    return output.with_suffix(".confusion.png")


class PredictionWriter:
    """Streams rows to a temporary file and renames it (and any companion files) into place on `commit`."""

    def __init__(self, output: Path, *, rows: int, classes: int, ids: Sequence[str] | None, with_labels: bool,
                 members: Sequence[str], weights: Sequence[float], backend: str | None = None,
                 member_backends: Sequence[str | None] = ()):
        self.output, self.rows, self.classes, self.ids = output, rows, classes, ids
        self.with_labels = with_labels
        self.format = output.suffix.lower().lstrip(".")
        self._work = Path(tempfile.mkdtemp(prefix=f".{output.name}.", dir=output.parent))
        self._companions: dict[Path, Path] = {}
        # backend: what every member predicted under here; member_backends: what each was trained under (or None)
        self._meta = {"members": list(members), "weights": [float(w) for w in weights], "classes": classes,
                      "backend": backend, "member_backends": list(member_backends) or [None] * len(members)}
        getattr(self, f"_open_{self.format}")()

    # -- formats -------------------------------------------------------------------------------------------------
    def _open_csv(self) -> None:
        self._file = open(self._work / "out", "w", newline="")
        self._csv = csv.writer(self._file)
        header = ["file" if self.ids else "row", *(f"prob_{c}" for c in range(self.classes)),
                  "predicted", "probability"]
        self._csv.writerow(header + (["label"] if self.with_labels else []))

    def _write_csv(self, start, probabilities, predicted, confidence, labels) -> None:
        for i, row in enumerate(probabilities):
            line = [self._id(start + i), *row.tolist(), int(predicted[i]), float(confidence[i])]
            self._csv.writerow(line + ([int(labels[i])] if labels is not None else []))

    def _open_json(self) -> None:
        self._file = open(self._work / "out", "w")
        head = json.dumps(self._meta)[:-1]  # leave the object open for "rows"
        self._file.write(head + ', "rows": [\n')
        self._first = True

    def _write_json(self, start, probabilities, predicted, confidence, labels) -> None:
        key = "file" if self.ids else "row"
        for i, row in enumerate(probabilities):
            record = {key: self._id(start + i), "probabilities": row.tolist(), "predicted": int(predicted[i]),
                      "probability": float(confidence[i])}
            if labels is not None:
                record["label"] = int(labels[i])
            self._file.write(("" if self._first else ",\n") + json.dumps(record))
            self._first = False

    def _open_npz(self) -> None:
        from numpy.lib.format import open_memmap

        shapes = {"probabilities": ((self.rows, self.classes), np.float64), "predicted": ((self.rows,), np.int64),
                  "probability": ((self.rows,), np.float64)}
        if self.with_labels:
            shapes["labels"] = ((self.rows,), np.int64)
        self._arrays = {name: open_memmap(self._work / f"{name}.npy", mode="w+", dtype=dtype, shape=shape)
                        for name, (shape, dtype) in shapes.items()}

    def _write_npz(self, start, probabilities, predicted, confidence, labels) -> None:
        end = start + len(probabilities)
        self._arrays["probabilities"][start:end] = probabilities
        self._arrays["predicted"][start:end] = predicted
        self._arrays["probability"][start:end] = confidence
        if labels is not None:
            self._arrays["labels"][start:end] = labels

    def _finish(self) -> Path:
        if self.format == "csv":
            self._file.close()
            return self._work / "out"
        if self.format == "json":
            self._file.write("\n]}\n")
            self._file.close()
            return self._work / "out"
        extra = {"members": np.array(self._meta["members"]), "weights": np.array(self._meta["weights"]),
                 "backend": np.array(self._meta["backend"] or ""),
                 "member_backends": np.array([b or "" for b in self._meta["member_backends"]])}
        if self.ids:
            extra["files"] = np.array(list(self.ids))
        for name, array in self._arrays.items():
            array.flush()
        del self._arrays  # close the memory maps before the files are zipped
        for name, array in extra.items():
            np.save(self._work / f"{name}.npy", array, allow_pickle=False)
        archive = self._work / "out"
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
            for npy in sorted(self._work.glob("*.npy")):
                zf.write(npy, arcname=npy.name)
        return archive

    # -- the interface -------------------------------------------------------------------------------------------
    def _id(self, index: int):
        return self.ids[index] if self.ids else index

    def add(self, start: int, probabilities: np.ndarray, labels: np.ndarray | None = None) -> None:
        """Write rows `start … start+len(probabilities)-1`."""
        predicted = probabilities.argmax(axis=1)
        confidence = probabilities[np.arange(len(probabilities)), predicted]
        getattr(self, f"_write_{self.format}")(start, probabilities, predicted, confidence, labels)

    def companion(self, final: Path) -> Path:
        """A temporary path for a file that is to appear at `final` together with the output (e.g. the PNG)."""
        temp = self._work / f"companion-{len(self._companions)}{final.suffix}"
        self._companions[final] = temp
        return temp

    def commit(self) -> list[Path]:
        """Move every file into place; returns the final paths."""
        done = self._finish()
        for final, temp in self._companions.items():
            os.replace(temp, final)
        os.replace(done, self.output)
        self.abort()
        return [self.output, *self._companions]

    def abort(self) -> None:
        if getattr(self, "_file", None) is not None and not self._file.closed:
            self._file.close()
        self.__dict__.pop("_arrays", None)
        shutil.rmtree(self._work, ignore_errors=True)

    def __enter__(self) -> "PredictionWriter":
        return self

    def __exit__(self, kind, *_exc) -> None:
        if kind is not None:
            self.abort()


def confusion_png(matrix: np.ndarray, path: Path, title: str) -> None:
    """Plot a confusion matrix (rows: true label, columns: predicted) with counts in the cells."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    classes = matrix.shape[0]
    size = min(max(4.0, 0.5 * classes + 2), 16.0)
    fig, ax = plt.subplots(figsize=(size, size * 0.9))
    image = ax.imshow(matrix, cmap="Blues")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    ax.set(xlabel="predicted", ylabel="true label", title=title, xticks=range(classes), yticks=range(classes))
    if classes <= 30:
        threshold = matrix.max() / 2 if matrix.size else 0
        for (i, j), count in np.ndenumerate(matrix):
            if count:
                ax.text(j, i, str(count), ha="center", va="center", fontsize=8,
                        color="white" if count > threshold else "black")
    fig.tight_layout()
    fig.savefig(path, dpi=100, format="png")
    plt.close(fig)
