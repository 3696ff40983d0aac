"""Recognise files that carry credentials, so they never reach a package, whatever the ignore files say.

(Named `credentials`, not `secrets`, so it cannot be mistaken for the standard library module.)
By name: `.env*`, `*.pem`, `*.p12`, `*.pfx`, SSH private keys (`id_rsa*`, `id_dsa*`, `id_ecdsa*`,
`id_ed25519*`). By content (files up to 1 MiB): a PEM private-key block anywhere, or a JSON object that is a
Google credential (`"type": "service_account"` / `"authorized_user"` / `"external_account"`) or holds a
`"private_key"`.
"""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path

_NAME_PATTERNS = (
    (".env*", "environment file (.env*)"),
    ("*.pem", "PEM key or certificate (*.pem)"),
    ("*.p12", "PKCS#12 key store (*.p12)"),
    ("*.pfx", "PKCS#12 key store (*.pfx)"),
    ("id_rsa*", "SSH private key (id_rsa*)"),
    ("id_dsa*", "SSH private key (id_dsa*)"),
    ("id_ecdsa*", "SSH private key (id_ecdsa*)"),
    ("id_ed25519*", "SSH private key (id_ed25519*)"),
)
_CREDENTIAL_TYPES = {"service_account": "Google service-account key",
                     "authorized_user": "Google user credentials (refresh token)",
                     "external_account": "Google workload-identity credentials"}
_SCAN_LIMIT = 1 << 20


def credential_reason(path: Path) -> str | None:
    """Why `path` looks like a credential file, or None if it does not."""
    name = path.name.lower()
    for pattern, reason in _NAME_PATTERNS:
        if fnmatch.fnmatchcase(name, pattern):
            return reason
    try:
        if path.stat().st_size > _SCAN_LIMIT:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    reason = _json_credential(data) if data.lstrip()[:1] == b"{" else None
    if reason is None and b"PRIVATE KEY-----" in data and b"-----BEGIN" in data:
        return "contains a PEM private-key block"
    return reason


def _json_credential(data: bytes) -> str | None:
    try:
        document = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(document, dict):
        return None
    kind = document.get("type")
    if isinstance(kind, str) and kind in _CREDENTIAL_TYPES:
        return f"{_CREDENTIAL_TYPES[kind]} (JSON \"type\": \"{kind}\")"
    if "private_key" in document:
        return "JSON with a \"private_key\""
    return None
