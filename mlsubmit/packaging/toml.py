"""Reading TOML on every Python the core supports: the standard library's tomllib from 3.11, its backport tomli
(a core requirement on 3.10) before."""

from __future__ import annotations

try:
    from tomllib import TOMLDecodeError, loads
except ModuleNotFoundError:  # Python 3.10
    from tomli import TOMLDecodeError, loads

__all__ = ["TOMLDecodeError", "loads"]
