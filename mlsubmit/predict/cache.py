"""A local content-addressed cache for files downloaded from gs:// (`$MLSUBMIT_HOME/cache`).

A file is stored under its digest: `sha256/ab/abcd….keras` for files a MANIFEST.json vouches for, `md5/…` for bare
model files (GCS records every object's MD5). The suffix is kept because Keras picks the loader by extension. A
file enters the cache only after its digest is checked, by an atomic rename, so a cached file is always whole.
"""

from __future__ import annotations

import base64
import hashlib
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from mlsubmit.cloud.storage import Checksums


@dataclass(frozen=True)
class Digests:
    """A file's sha256 (what MANIFEST.json records) and the checksums Cloud Storage records, in one read."""

    sha256: str  # hex
    checksums: Checksums  # base64 crc32c and md5, as GCS reports them

    @classmethod
    def of_file(cls, path: Path) -> "Digests":
        import google_crc32c

        sha, md5, crc = hashlib.sha256(), hashlib.md5(usedforsecurity=False), google_crc32c.Checksum()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                sha.update(chunk)
                md5.update(chunk)
                crc.update(chunk)
        encode = lambda digest: base64.b64encode(digest).decode()  # noqa: E731
        return cls(sha.hexdigest(), Checksums(crc32c=encode(crc.digest()), md5=encode(md5.digest())))


def md5_hex(md5_base64: str) -> str:
    return base64.b64decode(md5_base64).hex()


@dataclass
class Cache:
    """Where downloads go, and how many were downloaded or reused in this run."""

    root: Path
    downloaded: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)

    def path(self, algorithm: str, digest: str, suffix: str) -> Path:
        return self.root / algorithm / digest[:2] / f"{digest}{suffix}"

    def temp_file(self) -> Path:
        """A fresh file inside the cache (same filesystem, so `admit` is an atomic rename)."""
        (self.root / "tmp").mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=self.root / "tmp", prefix="download-")
        os.close(fd)
        return Path(name)

    def admit(self, temp: Path, target: Path) -> Path:
        from mlsubmit.cache import ownership

        target.parent.mkdir(parents=True, exist_ok=True)
        return ownership.keep(temp, target, "download")  # in place, and listed as mlsubmit's
