"""What to predict on: an .npz (`x_test` or `--input-key`), a .npy, or image files/globs; and the labels.

Arrays are read from the file in batches (an .npz member is streamed out of its zip, a .npy from disk), so memory is
bounded by the batch, not the input. Preprocessing is the bundled trainer's (`mlsubmit_runtime.features`, which
both use): uint8 is scaled to [0, 1],
other real numbers become float32, and (n, H, W) gains a channel axis. Images are read with Pillow, converted to grey
or RGB to match the models' channels and resized to their height and width. Shape and dtype are checked against the
models from the file's header before any prediction.
"""

from __future__ import annotations

import glob
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from mlsubmit.errors import UsageError, did_you_mean, invalid_value

DEFAULT_KEY = "x_test"
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")
_CHANNEL_MODES = {1: "L", 3: "RGB", 4: "RGBA"}


def preprocess(x: np.ndarray, what: str) -> np.ndarray:
    """The bundled trainer's feature preprocessing (one batch), with its errors as UsageError."""
    from mlsubmit_runtime.errors import InputError
    from mlsubmit_runtime.features import features  # the trainer's own function: the two never drift apart

    try:
        return features(x, what)
    except InputError as exc:
        raise UsageError(str(exc)) from None


def _shape_text(shape) -> str:
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ")"


def shape_matches(sample_shape: tuple, expected: tuple) -> bool:
    return len(sample_shape) == len(expected) and all(e is None or s == e for s, e in zip(sample_shape, expected))


@dataclass(frozen=True)
class ArrayInput:
    """One array in a .npy file or an .npz member, read batch by batch."""

    path: Path
    member: str | None  # the .npz key, or None for a .npy
    shape: tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool

    @property
    def description(self) -> str:
        return f"{self.path}[{self.member}]" if self.member else str(self.path)

    @property
    def count(self) -> int:
        return self.shape[0]

    @property
    def ids(self) -> None:
        return None  # rows are numbered

    @property
    def sample_shape(self) -> tuple[int, ...]:
        """The shape of one sample after preprocessing (the channel axis added to (n, H, W))."""
        return (*self.shape[1:], 1) if len(self.shape) == 3 else tuple(self.shape[1:])

    def check(self, model_shape: tuple) -> None:
        if not shape_matches(self.sample_shape, model_shape):
            raise UsageError(f"invalid input {self.description}: shape {self.shape} gives samples of shape "
                             f"{_shape_text(self.sample_shape)}; the models expect {_shape_text(model_shape)}",
                             hint="pass data shaped like the training data (--input-key picks another array)")

    @contextmanager
    def _stream(self):
        if self.member is None:
            with open(self.path, "rb") as f:
                yield f
        else:
            with zipfile.ZipFile(self.path) as archive, archive.open(f"{self.member}.npy") as f:
                yield f

    def batches(self, batch_size: int, model_shape: tuple) -> Iterator[np.ndarray]:
        if self.fortran_order:  # rows are not contiguous: memory-map a .npy, read an .npz member whole (rare)
            if self.member is None:
                array = np.load(self.path, mmap_mode="r", allow_pickle=False)
            else:
                with np.load(self.path, allow_pickle=False) as data:
                    array = data[self.member]
            for start in range(0, self.count, batch_size):
                yield _finite(preprocess(np.ascontiguousarray(array[start:start + batch_size]), self.description),
                              start, self.description)
            return
        row_bytes = int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize
        with self._stream() as f:
            _read_header(f)
            for start in range(0, self.count, batch_size):
                rows = min(batch_size, self.count - start)
                buffer = _read_exactly(f, rows * row_bytes, self.description)
                raw = np.frombuffer(buffer, dtype=self.dtype).reshape(rows, *self.shape[1:])
                yield _finite(preprocess(raw, self.description), start, self.description)


def _finite(x: np.ndarray, start: int, what: str) -> np.ndarray:
    """The batch, if every value is finite; else the first row that is not (a model turns NaN into NaN)."""
    if x.dtype.kind == "f" and not np.isfinite(x).all():
        row = int(np.argmin(np.isfinite(x).reshape(len(x), -1).all(axis=1)))
        bad = x[row][~np.isfinite(x[row])].flat[0]
        raise UsageError(f"invalid input {what}: row {start + row} holds {bad}; expected finite numbers",
                         hint="drop or fill in the rows with NaN or inf before predicting")
    return x


def _read_exactly(f, size: int, what: str) -> bytes:
    chunks, left = [], size
    while left:
        chunk = f.read(left)
        if not chunk:
            raise UsageError(f"invalid input {what}: the file ends early (truncated)", hint="write it again")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _read_header(f) -> tuple[tuple[int, ...], bool, np.dtype]:
    from numpy.lib import format as npy

    version = npy.read_magic(f)
    if version == (1, 0):
        return npy.read_array_header_1_0(f)
    if version == (2, 0):
        return npy.read_array_header_2_0(f)
    return npy._read_array_header(f, version)  # 3.0 (utf-8 field names): no public reader


def _header(path: Path, member: str | None) -> tuple[tuple[int, ...], bool, np.dtype]:
    """(shape, fortran order, dtype) of a .npy, or of the member of an .npz."""
    if member is None:
        with open(path, "rb") as f:
            return _read_header(f)
    with zipfile.ZipFile(path) as archive, archive.open(f"{member}.npy") as f:
        return _read_header(f)


def _open_array(path: Path, member: str | None) -> ArrayInput:
    what = f"{path}[{member}]" if member else str(path)
    try:
        shape, fortran, dtype = _header(path, member)
    except (ValueError, OSError, zipfile.BadZipFile, KeyError) as exc:
        raise UsageError(f"invalid input {what}: cannot read it as a numpy array ({exc})") from None
    if dtype.hasobject or dtype.kind not in "uif":
        raise UsageError(f"invalid input {what}: dtype {dtype}; expected uint8 images or real numbers "
                         "(float or int)", hint="convert the array, e.g. x.astype('float32')")
    if len(shape) < 2 or shape[0] < 1:
        raise UsageError(f"invalid input {what}: shape {shape}; expected (samples, features…) with at least "
                         "one sample")
    return ArrayInput(path, member, tuple(shape), dtype, fortran)


def _npz_keys(path: Path) -> list[str]:
    try:
        with zipfile.ZipFile(path) as archive:
            return [n[:-4] for n in archive.namelist() if n.endswith(".npy")]
    except (OSError, zipfile.BadZipFile) as exc:
        raise UsageError(f"invalid value for --input: cannot read {path} as .npz ({exc})") from None


@dataclass(frozen=True)
class ImageInput:
    """Image files, read, converted and resized batch by batch."""

    files: tuple[Path, ...]

    description = "images"
    sample_shape = None

    @property
    def count(self) -> int:
        return len(self.files)

    @property
    def ids(self) -> list[str]:
        return [str(f) for f in self.files]

    def check(self, model_shape: tuple) -> None:
        if len(model_shape) != 3 or model_shape[2] not in _CHANNEL_MODES or None in model_shape[:2]:
            raise UsageError(f"invalid value for --input: image files, but the models take inputs of shape "
                             f"{_shape_text(model_shape)}, not (height, width, 1|3|4) images",
                             hint="pass an .npz or .npy shaped like the training data")

    def batches(self, batch_size: int, model_shape: tuple) -> Iterator[np.ndarray]:
        from PIL import Image, UnidentifiedImageError

        height, width, channels = model_shape
        for start in range(0, self.count, batch_size):
            pixels = []
            for path in self.files[start:start + batch_size]:
                try:
                    with Image.open(path) as image:
                        image = image.convert(_CHANNEL_MODES[channels]).resize((width, height),
                                                                                Image.Resampling.BILINEAR)
                        pixels.append(np.asarray(image, dtype=np.uint8))
                except (OSError, UnidentifiedImageError, ValueError) as exc:
                    raise UsageError(f"invalid input image {path}: cannot read it ({exc})") from None
            yield preprocess(np.stack(pixels), "images")


def _image_files(patterns: tuple[str, ...]) -> tuple[Path, ...]:
    files: list[Path] = []
    for pattern in patterns:
        if glob.has_magic(pattern):
            matches = sorted(Path(p) for p in glob.glob(pattern, recursive=True) if Path(p).is_file())
            if not matches:
                raise invalid_value("--input", pattern, "a pattern that matches image files",
                                    hint="quote the pattern so the shell leaves it to mlsubmit")
            files.extend(matches)
        else:
            if not Path(pattern).is_file():
                raise invalid_value("--input", pattern, "an existing .npz, .npy or image file")
            files.append(Path(pattern))
    wrong = [f for f in files if f.suffix.lower() not in IMAGE_SUFFIXES]
    if wrong:
        raise invalid_value("--input", str(wrong[0]), "an .npz, a .npy, or image files ("
                            + ", ".join(IMAGE_SUFFIXES) + ")")
    return tuple(files)


def open_input(inputs: tuple[str, ...], key: str | None) -> ArrayInput | ImageInput:
    """Open the input named by --input (and --input-key) and read its header; no sample is read yet."""
    arrays = [p for p in inputs if Path(p).suffix.lower() in (".npz", ".npy")]
    if arrays and len(inputs) > 1:
        raise invalid_value("--input", ", ".join(inputs), "one .npz or .npy, or any number of image files/globs")
    if not arrays:
        if key:
            raise invalid_value("--input-key", key, "no key for image input (it names an array in an .npz)")
        return ImageInput(_image_files(inputs))
    path = Path(arrays[0])
    if not path.is_file():
        raise invalid_value("--input", str(path), "an existing .npz, .npy or image file")
    if path.suffix.lower() == ".npy":
        if key:
            raise invalid_value("--input-key", key, "no key for a .npy (it holds one array)")
        return _open_array(path, None)
    keys = _npz_keys(path)
    member = key or DEFAULT_KEY
    if member not in keys:
        if key is None and len(keys) == 1:
            member = keys[0]
        else:
            raise invalid_value("--input-key", member, f"a key of {path}: {', '.join(keys) or 'none'}",
                                hint=did_you_mean(member, keys))
    return _open_array(path, member)


def _labels_from(spec: str, path: Path, key: str | None) -> np.ndarray:
    """The labels array at `path` (an .npz's `key`), refused in one line if it is not plain numbers."""
    what = f"{path}[{key}]" if key else str(path)
    try:
        _, _, dtype = _header(path, key)  # no pickle is run to read it
    except (ValueError, OSError, zipfile.BadZipFile, KeyError) as exc:
        raise invalid_value("--labels", spec, "a readable .npz or .npy of labels", hint=str(exc)) from None
    if dtype.hasobject:
        raise invalid_value("--labels", spec, f"integer class labels; {what} holds Python objects (dtype object), "
                            "which only unpickling could read", hint="save the labels as integers, e.g. "
                            "np.savez(FILE, y_test=y.astype('int64'))")
    try:
        if key is None:
            return np.load(path, allow_pickle=False)
        with np.load(path, allow_pickle=False) as data:
            return data[key]
    except (ValueError, OSError, zipfile.BadZipFile, KeyError, EOFError) as exc:
        raise invalid_value("--labels", spec, "a readable .npz or .npy of labels", hint=str(exc)) from None


def _label_array(spec: str, source: ArrayInput | ImageInput) -> tuple[np.ndarray, str]:
    path = Path(spec)
    if path.is_file() and path.suffix.lower() in (".npz", ".npy"):
        if path.suffix.lower() == ".npy":
            return _labels_from(spec, path, None), str(path)
        keys = _npz_keys(path)
        key = "y_test" if "y_test" in keys else (keys[0] if len(keys) == 1 else None)
        if key is None:
            raise invalid_value("--labels", spec, f"an .npz with y_test or a single array; found "
                                f"{', '.join(keys) or 'none'}")
        return _labels_from(spec, path, key), f"{path}[{key}]"
    if isinstance(source, ArrayInput) and source.member is not None:
        keys = _npz_keys(source.path)
        if spec in keys:
            return _labels_from(spec, source.path, spec), f"{source.path}[{spec}]"
        raise invalid_value("--labels", spec, f"a .npz/.npy file or a key of {source.path}: {', '.join(keys)}",
                            hint=did_you_mean(spec, keys))
    raise invalid_value("--labels", spec, "an existing .npz or .npy file of labels")


def load_labels(spec: str, source: ArrayInput | ImageInput) -> tuple[np.ndarray, str]:
    """--labels (a file, or a key of the input .npz) → integer labels, one per input row, and where they came from."""
    from mlsubmit_runtime.errors import InputError
    from mlsubmit_runtime.features import labels as parse_labels

    raw, where = _label_array(spec, source)
    try:
        labels = parse_labels(raw, where)
    except InputError as exc:
        raise UsageError(f"invalid value for --labels: {exc}") from None
    if len(labels) != source.count:
        raise invalid_value("--labels", where, f"one label per input row ({source.count}); it has {len(labels)}")
    return labels, where
