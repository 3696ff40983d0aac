"""Bounds on a model file checked before Keras opens it: what it declares, not what it takes on disk.

A .keras file is a zip archive. Keras reads `config.json` (and `metadata.json`) whole into memory and parses it;
a member can declare gigabytes and be stored in a few MB (deflate inflates up to ~1,000×), and Keras 3 refuses
only members over 4 GiB. So, from the archive's central directory alone (nothing is inflated):

- at most MAX_MEMBERS members (Keras writes three, plus a layer's assets), counted from the end record before the
  directory is parsed, so a million-entry directory is never built in memory;
- no member path that is absolute or climbs out with `..` (Keras extracts assets to disk);
- a member Keras reads whole (`*.json`) declares at most MAX_READ_WHOLE bytes;
- no member over EXPANSION_FLOOR bytes declares more than MAX_EXPANSION× what it stores (Keras stores members
  uncompressed: 1×; a zip tool's recompression of real weights stays far below 100×);
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


def _bounds_problem(path: Path) -> str | None:
    entries = _entries(path)
    if entries is not None and entries > MAX_MEMBERS:
        return f"it declares {entries:,} members; expected at most {MAX_MEMBERS:,} (Keras writes three, plus assets)"
    with zipfile.ZipFile(path) as archive:
        infos = archive.infolist()
    if len(infos) > MAX_MEMBERS:
        return f"it holds {len(infos):,} members; expected at most {MAX_MEMBERS:,} (Keras writes three, plus assets)"
    return next((problem for problem in map(_member_problem, infos) if problem), None)


def check_archive(path: Path, name: str) -> None:
    """Refuse the .keras file at `path` (the MODEL argument `name`) before Keras opens it; no-op for other files.

    Raises:
        UsageError: naming the file, and the member with its declared size and the limit; or the damage.
    """
    if Path(path).suffix != ".keras":
        return
    try:
        problem = _bounds_problem(path)
        if problem:
            raise UsageError(f"invalid value for MODEL: {name} is not loaded: {problem}",
                             hint="this is not an archive Keras wrote; save the model again with model.save()")
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()  # inflates every member: only once their sizes are known to be bounded
    except (zipfile.BadZipFile, EOFError, OSError) as exc:
        bad = None
        damage = f"not a complete .keras zip archive of {Path(path).stat().st_size} bytes: {exc}"
    else:
        damage = f"{bad} fails its CRC check" if bad else None
    if damage:
        raise UsageError(f"invalid value for MODEL: {name} is damaged or truncated ({damage})",
                         hint="copy or download the model again")
