"""Sizes and ages as users write them, and the two settings that bound what mlsubmit keeps.

- MLSUBMIT_CACHE_MAX_SIZE (e.g. `20GB`; unset or `off`: no size limit): after a build adds something, what mlsubmit
  can rebuild is cut to this size, least recently used first.
- MLSUBMIT_CACHE_MAX_AGE (default `30d`; `off`: none): after a build, what was not used for this long is removed.

`mlsubmit cache prune --max-size/--older-than` override them for one run.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from mlsubmit.errors import invalid_value

SIZE_VARIABLE = "MLSUBMIT_CACHE_MAX_SIZE"
AGE_VARIABLE = "MLSUBMIT_CACHE_MAX_AGE"
DEFAULT_AGE = "30d"
_OFF = ("", "0", "off", "none", "no")
# decimal units as disks are sold and du --si counts; the binary ones by their IEC names
_SIZE_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
               "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_AGE_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_NUMBER = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")
SIZE_EXPECTED = "a size such as 20GB, 500MB or 1.5GiB (GB = 10^9 bytes, GiB = 2^30)"
AGE_EXPECTED = "an age such as 30d, 12h, 2w or 90m (m: minutes)"


def parse_size(text: str, field: str) -> int:
    """Bytes of `text` ("20GB", "1.5GiB", "500MB"). Raises UsageError naming `field`."""
    found = _NUMBER.match(text) if isinstance(text, str) and text.isascii() else None
    unit = found and _SIZE_UNITS.get(found.group(2).lower())
    if not found or unit is None:
        raise invalid_value(field, text, SIZE_EXPECTED)
    return int(float(found.group(1)) * unit)


def parse_age(text: str, field: str) -> float:
    """Seconds of `text` ("30d", "12h"). Raises UsageError naming `field`."""
    found = _NUMBER.match(text) if isinstance(text, str) and text.isascii() else None
    unit = found and _AGE_UNITS.get(found.group(2).lower())
    if not found or unit is None:
        raise invalid_value(field, text, AGE_EXPECTED)
    return float(found.group(1)) * unit


def show_size(size: int) -> str:
    """`size` bytes as people read it: 812 kB, 26.4 MB, 2.2 GB (decimal, as du --si)."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if size >= scale:
            return f"{size / scale:,.1f} {unit}"
    return f"{size} B"


@dataclass(frozen=True)
class Limits:
    """What a prune keeps: at most `max_size` bytes of what can be rebuilt, nothing unused for `max_age` seconds."""

    max_size: int | None = None
    max_age: float | None = None


def from_environment(environ=None) -> Limits:
    """The limits MLSUBMIT_CACHE_MAX_SIZE and MLSUBMIT_CACHE_MAX_AGE set (default: no size limit, 30 days).

    Raises:
        UsageError: either is set to what is not a size or an age.
    """
    environ = os.environ if environ is None else environ
    size = environ.get(SIZE_VARIABLE, "").strip()
    age = environ.get(AGE_VARIABLE, DEFAULT_AGE).strip()
    return Limits(None if size.lower() in _OFF else parse_size(size, SIZE_VARIABLE),
                  None if age.lower() in _OFF else parse_age(age, AGE_VARIABLE))
