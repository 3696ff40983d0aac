"""Bounds on a model file checked before Keras opens it: what it declares, not what it takes on disk.

A .keras file is a zip archive. Keras reads `config.json` (and `metadata.json`) whole into memory and parses it;
a member can declare gigabytes and be stored in a few MB (deflate inflates up to ~1,000×), and Keras 3 refuses
only members over 4 GiB. So, from what the archive and its weights declare (nothing is inflated to check it):

- at most MAX_MEMBERS members (Keras writes three, plus a layer's assets), counted from the end record before the
  directory is parsed, so a million-entry directory is never built in memory;
- no member path that is absolute or climbs out with `..` (Keras extracts assets to disk);
- a member Keras reads whole (`*.json`) declares at most MAX_READ_WHOLE bytes;
- no member over EXPANSION_FLOOR bytes declares more than MAX_EXPANSION× what it stores (Keras stores members
  uncompressed: 1×; a zip tool's recompression of real weights stays far below 100×);
- in its weights (model.weights.h5 in a .keras, or a whole .h5 model) no HDF5 dataset over EXPANSION_FLOOR bytes
  declares more than MAX_EXPANSION× what it stores: a chunked dataset never written stores nothing and reads
  as its fill value, so a 1 KB file can declare 4 GB of weights (Keras 3 refuses only datasets over 4 GiB); at most
  MAX_H5_OBJECTS groups and datasets are looked at. (Attributes, model_config among them, take no filters: one
  Keras reads whole takes as many bytes on disk, so it is bounded by the file the user has.)
- every member's CRC matches (a cut-off or damaged copy, which Keras would report as "File not found") — checked
  last, once the sizes are known to be bounded.

Example:
    >>> check_archive(Path("model.keras"), "model.keras")  # raises UsageError naming the member and the limit
"""

from __future__ import annotations

import zipfile
from pathlib import Path, PurePosixPath

from mlsubmit.errors import UsageError

MAX_MEMBERS = 1_000
MAX_H5_OBJECTS = 100_000
WEIGHTS = "model.weights.h5"
MAX_READ_WHOLE = 64 << 20  # 64 MiB: a config.json of a large model is a few MB
MAX_EXPANSION = 100  # the ratio Keras 3 itself calls a bomb (over 4 GiB only)
EXPANSION_FLOOR = 16 << 20  # below this, inflating costs nothing worth refusing


def _entries(path: Path) -> int | None:
    """The member count the zip's end record declares (None where it cannot be read: zipfile will say why)."""
    try:
        with open(path, "rb") as handle:
            record = zipfile._EndRecData(handle)  # the end record only; stable in CPython 3.6-3.13
    except (AttributeError, OSError, zipfile.BadZipFile):
        return None
    return record[zipfile._ECD_ENTRIES_TOTAL] if record else None


def _member_problem(info: zipfile.ZipInfo) -> str | None:
    name, declared, stored = info.filename, info.file_size, info.compress_size
    pure = PurePosixPath(name.replace("\\", "/"))
    if pure.is_absolute() or ".." in pure.parts or (pure.parts and pure.parts[0].endswith(":")):
        return f"member {name!r} has a path outside the archive; expected paths inside it"
    if name.endswith(".json") and declared > MAX_READ_WHOLE:
        return (f"member {name} declares {declared:,} bytes; expected at most {MAX_READ_WHOLE:,} (64 MiB) for a file "
                "Keras reads whole into memory")
    if declared > EXPANSION_FLOOR and declared > MAX_EXPANSION * max(stored, 1):
        return (f"member {name} declares {declared:,} bytes stored in {stored:,} ({declared // max(stored, 1):,}× "
                f"compressed); expected at most {MAX_EXPANSION}× (Keras stores members uncompressed)")
    return None


def _h5_problem(source, where: str) -> str | None:
    """Why the HDF5 file `source` (a path or a seekable file object) would make Keras allocate far more than it
    stores, or None; `where` names it in the message ("" for the model file itself)."""
    import h5py

    seen = [0]

    def visit(name: str, item) -> str | None:
        seen[0] += 1
        if seen[0] > MAX_H5_OBJECTS:
            return f"{where}it holds more than {MAX_H5_OBJECTS:,} groups and datasets; expected a Keras model's few"
        if not isinstance(item, h5py.Dataset):
            return None
        declared, stored = item.size * item.dtype.itemsize, item.id.get_storage_size()
        if declared > EXPANSION_FLOOR and declared > MAX_EXPANSION * max(stored, 1):
            return (f"{where}dataset {name} declares {declared:,} bytes {tuple(item.shape)} stored in {stored:,}; "
                    f"expected at most {MAX_EXPANSION}× what it stores (weights Keras saved are stored whole)")
        return None

    with h5py.File(source, "r") as weights:
        return weights.visititems(visit)


def _bounds_problem(path: Path) -> str | None:
    entries = _entries(path)
    if entries is not None and entries > MAX_MEMBERS:
        return f"it declares {entries:,} members; expected at most {MAX_MEMBERS:,} (Keras writes three, plus assets)"
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
    if len(infos) > MAX_MEMBERS:
        return f"it holds {len(infos):,} members; expected at most {MAX_MEMBERS:,} (Keras writes three, plus assets)"
    problem = next((problem for problem in map(_member_problem, infos) if problem), None)
    if problem is None and WEIGHTS in {info.filename for info in infos}:
        try:
            with zipfile.ZipFile(path) as archive, archive.open(WEIGHTS) as weights:
                problem = _h5_problem(weights, f"member {WEIGHTS}: ")
        except OSError as exc:  # h5py's "Unable to open file": not the archive's fault, the member's
            problem = f"member {WEIGHTS} is not an HDF5 file ({(str(exc).splitlines() or [''])[0][:160]})"
    return problem


def check_archive(path: Path, name: str) -> None:
    """Refuse the .keras file at `path` (the MODEL argument `name`) before Keras opens it; no-op for other files.

    Raises:
        UsageError: naming the file, and the member with its declared size and the limit; or the damage.
    """
    suffix = Path(path).suffix
    if suffix not in (".keras", ".h5"):
        return
    try:
        problem = _bounds_problem(path) if suffix == ".keras" else _h5_problem(path, "")
        if problem:
            raise UsageError(f"invalid value for MODEL: {name} is not loaded: {problem}",
                             hint="this is not a model file Keras wrote; save the model again with model.save()")
        if suffix == ".h5":
            return  # h5py reads what it is asked for; Keras reports an unreadable one itself
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()  # inflates every member: only once their sizes are known to be bounded
    except (zipfile.BadZipFile, EOFError, OSError) as exc:
        if suffix == ".h5":
            return  # not HDF5 at all: Keras's own message names it
        bad = None
        damage = f"not a complete .keras zip archive of {Path(path).stat().st_size} bytes: {exc}"
    else:
        damage = f"{bad} fails its CRC check" if bad else None
    if damage:
        raise UsageError(f"invalid value for MODEL: {name} is damaged or truncated ({damage})",
                         hint="copy or download the model again")
