"""Default job names: the trainer package's name and the time, valid as a legacy job id and a Vertex AI name."""

from __future__ import annotations

import re
import secrets
import time


def generate_job_name(base: str) -> str:
    """`<base>_<UTC yyyymmdd_HHMMSS>_<6 hex>` (`tinypkg_20261124_134501_3fa2c1`): readable, unique, a valid legacy
    job id and Vertex AI display name. `base` is the package's distribution name."""
    stem = re.sub(r"\W", "_", base.strip()) or "job"
    stem = stem if stem[0].isalpha() else f"job_{stem}"
    return f"{stem[:64]}_{time.strftime('%Y%m%d_%H%M%S', time.gmtime())}_{secrets.token_hex(3)}"
