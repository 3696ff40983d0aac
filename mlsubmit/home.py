"""Where mlsubmit keeps what it builds and remembers: $MLSUBMIT_HOME (default ~/.mlsubmit)."""

from __future__ import annotations

import os
from pathlib import Path


def mlsubmit_home() -> Path:
    """$MLSUBMIT_HOME, default ~/.mlsubmit."""
    return Path(os.environ.get("MLSUBMIT_HOME") or Path.home() / ".mlsubmit")
