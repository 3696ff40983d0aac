"""Recognise files that carry credentials, so they never reach a package, whatever the ignore files say.

(Named `credentials`, not `secrets`, so it cannot be mistaken for the standard library module.)

By name (`name_reason`): `.env*`; key stores and key files (`*.pem`, `*.key`, `*.p12`, `*.pfx`, `*.keystore`,
`*.jks`, `*.ppk`); SSH private keys (`id_rsa*`, `id_dsa*`, `id_ecdsa*`, `id_ed25519*`); `.netrc`/`_netrc`,
`.git-credentials`, `.pypirc`, `.pgpass`, `.dockercfg`; gcloud's `credentials.db`, `access_tokens.db`, `.boto`,
`application_default_credentials.json`; OAuth `client_secret*.json`; and whole directories `.ssh/`, `.gnupg/`,
`.aws/` (AWS `credentials` and `config`), `.kube/`, gcloud's `legacy_credentials/`.

By content (`ContentScan`, every file, whatever its size, streamed; UTF-8 with or without a BOM, UTF-16 and
UTF-32 are decoded): a PEM private-key block; a Google credential `"type"` (service account, user, workload
identity…); in JSON, a `"private_key"`, `"client_secret"`, `"refresh_token"` or Docker registry `"auths"`;
`aws_secret_access_key` / `aws_session_token`; an AWS key id (`AKIA…`/`ASIA…`) together with a 40-character
secret; `_authToken=` (and in `.npmrc`, `_auth=`/`_password=`); a netrc `machine … login … password …` entry;
GitHub tokens.
"""

from __future__ import annotations

import codecs
import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path

CHUNK = 1 << 20
_OVERLAP = 4096  # a tell that straddles two chunks is still seen

_DIR_NAMES = {".ssh": "SSH keys directory (.ssh/)", ".gnupg": "GnuPG keyring directory (.gnupg/)",
              ".aws": "AWS credentials directory (.aws/)", ".kube": "Kubernetes credentials directory (.kube/)",
              "legacy_credentials": "gcloud credentials directory (legacy_credentials/)"}
_FILE_PATTERNS = (
    (".env*", "environment file (.env*)"),
    ("*.pem", "PEM key or certificate (*.pem)"),
    ("*.key", "private key file (*.key)"),
    ("*.p12", "PKCS#12 key store (*.p12)"),
    ("*.pfx", "PKCS#12 key store (*.pfx)"),
    ("*.keystore", "Java key store (*.keystore)"),
    ("*.jks", "Java key store (*.jks)"),
    ("*.ppk", "PuTTY private key (*.ppk)"),
    ("id_rsa*", "SSH private key (id_rsa*)"),
    ("id_dsa*", "SSH private key (id_dsa*)"),
    ("id_ecdsa*", "SSH private key (id_ecdsa*)"),
    ("id_ed25519*", "SSH private key (id_ed25519*)"),
    (".netrc", "netrc passwords (.netrc)"),
    ("_netrc", "netrc passwords (_netrc)"),
    (".git-credentials", "git credential store (.git-credentials)"),
    (".pypirc", "PyPI upload credentials (.pypirc)"),
    (".pgpass", "PostgreSQL passwords (.pgpass)"),
    (".dockercfg", "Docker registry credentials (.dockercfg)"),
    (".boto", "gcloud/boto credentials (.boto)"),
    ("credentials.db", "gcloud credential store (credentials.db)"),
    ("access_tokens.db", "gcloud access-token cache (access_tokens.db)"),
    ("application_default_credentials.json", "Google application-default credentials"),
    ("client_secret*.json", "OAuth client secret (client_secret*.json)"),
)
_GOOGLE_TYPES = {"service_account": "Google service-account key",
                 "authorized_user": "Google user credentials (refresh token)",
                 "external_account": "Google workload-identity credentials",
                 "external_account_authorized_user": "Google workforce-identity credentials",
                 "impersonated_service_account": "Google impersonation credentials",
                 "gdch_service_account": "Google Distributed Cloud service-account key"}


def name_reason(rel_path: str, is_dir: bool) -> str | None:
    """Why a file or directory at `rel_path` ('/'-separated) is a credential by its name alone, or None."""
    *parents, name = rel_path.split("/")
    for parent in parents:
        if parent in _DIR_NAMES:
            return f"inside {_DIR_NAMES[parent]}"
    if is_dir:
        return _DIR_NAMES.get(name)
    lowered = name.lower()
    return next((reason for pattern, reason in _FILE_PATTERNS if fnmatch.fnmatchcase(lowered, pattern)), None)


@dataclass(frozen=True)
class _Tell:
    regex: re.Pattern  # each starts with a literal, which the regex engine finds as fast as bytes.find
    reason: str
    scope: str = "any"  # "any", "json" (a .json name or a document starting with "{"), "npmrc"


def _tell(pattern: str, reason: str, scope: str = "any") -> _Tell:
    return _Tell(re.compile(pattern.encode()), reason, scope)


_TYPES = "|".join(_GOOGLE_TYPES)
_NETRC_ENTRY = r"\s+login\s+\S+\s+password\s+\S"  # with its login: "machine learning password" is prose
# In order of precedence: the first that matches names the file.
_TELLS = (
    _tell(rf'"type"\s*:\s*"({_TYPES})"', "google"),
    _tell(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----", "contains a PEM private-key block"),
    _tell(r"PuTTY-User-Key-File-\d", "contains a PuTTY private key"),
    _tell(r'"private_key"\s*:', 'JSON with a "private_key"', "json"),
    _tell(r'"client_secret"\s*:', 'OAuth client secret (JSON "client_secret")', "json"),
    _tell(r'"refresh_token"\s*:\s*"', 'OAuth refresh token (JSON "refresh_token")', "json"),
    _tell(r'"auths"\s*:\s*\{[^}]*"(?:auth|identitytoken)"\s*:\s*"[^"]', 'registry credentials (JSON "auths")',
          "json"),
    _tell(r"aws_(?:secret_access_key|session_token)\s*[=:]", "AWS secret access key (aws_secret_access_key)"),
    _tell(r"AWS_(?:SECRET_ACCESS_KEY|SESSION_TOKEN)\s*[=:]", "AWS secret access key (AWS_SECRET_ACCESS_KEY)"),
    _tell(r"_authToken\s*=\s*\S", "npm registry token (_authToken=)"),
    _tell(r"(?m)^\s*(?:\S*:)?_(?:auth|password)\s*=\s*\S", "npm registry credentials (_auth= / _password=)",
          "npmrc"),
    _tell(r"machine\s+\S+" + _NETRC_ENTRY, "netrc password entry (machine … login … password …)"),
    _tell(r"default" + _NETRC_ENTRY, "netrc password entry (default login … password …)"),
    _tell(r"gh(?:[pousr]_[A-Za-z0-9]{36}|ithub_pat_[A-Za-z0-9_]{40})", "GitHub token (ghp_… / github_pat_…)"),
)
# An AWS key id is not a secret by itself; with a secret key beside it, the file is a credential.
_AWS_KEY_IDS = (re.compile(rb"AKIA[0-9A-Z]{16}(?![0-9A-Z])"), re.compile(rb"ASIA[0-9A-Z]{16}(?![0-9A-Z])"))
_AWS_SECRET = re.compile(rb"(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]*[G-Zg-z/+])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
_AWS_PAIR = "AWS access key id (AKIA…) with a secret key"

_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def _text_encoding(head: bytes) -> str | None:
    """The wide text encoding the first bytes reveal (a BOM, or ASCII interleaved with NULs), else None."""
    for bom, encoding in _BOMS:
        if head.startswith(bom):
            return None if encoding == "utf-8-sig" else encoding
    if len(head) >= 4 and head[1] == head[3] == 0 and head[0] and head[2]:
        return "utf-16-le"
    if len(head) >= 4 and head[0] == head[2] == 0 and head[1] and head[3]:
        return "utf-16-be"
    return None


class ContentScan:
    """Feed a file's bytes in order; `reason` says whether they hold a credential (and stays set once found).

    The raw bytes are scanned, and for UTF-16/32 text its decoded form as well, so neither an encoding nor a
    binary header hides a tell.
    """

    def __init__(self, name: str):
        lowered = name.lower()
        self.scopes = {"any"} | ({"json"} if lowered.endswith(".json") else set()) | (
            {"npmrc"} if lowered in (".npmrc", "npmrc") else set())
        self.reason: str | None = None
        self._started = False
        self._decoder = None
        self._tails = [b"", b""]  # the end of the previous raw / decoded chunk
        self._aws_id = False

    def feed(self, data: bytes) -> str | None:
        if self.reason is not None or not data:
            return self.reason
        if not self._started:
            self._started = True
            encoding = _text_encoding(data[:4])
            if encoding is not None:
                self._decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
            head = data[3:] if data.startswith(codecs.BOM_UTF8) else data
            if head.lstrip()[:1] == b"{":
                self.scopes.add("json")
        self._scan(0, data)
        if self._decoder is not None and self.reason is None:
            decoded = self._decoder.decode(data).encode("utf-8", "replace")
            if not self._tails[1] and decoded.lstrip().startswith(b"{"):
                self.scopes.add("json")
            self._scan(1, decoded)
        return self.reason

    def _scan(self, stream: int, data: bytes) -> None:
        window = self._tails[stream] + data
        self._tails[stream] = window[-_OVERLAP:]
        for tell in _TELLS:
            if tell.scope in self.scopes and (match := tell.regex.search(window)):
                kind = match.group(1).decode() if match.groups() else ""
                self.reason = f'{_GOOGLE_TYPES[kind]} (JSON "type": "{kind}")' if kind else tell.reason
                return
        # (the secret is looked for only once a key id was seen: the 40-character search is the costly one)
        self._aws_id = self._aws_id or any(key_id.search(window) for key_id in _AWS_KEY_IDS)
        if self._aws_id and _AWS_SECRET.search(window):
            self.reason = _AWS_PAIR


def content_reason(path: Path, name: str | None = None) -> str | None:
    """Why the file at `path` holds a credential, reading it in chunks (any size), or None.

    Raises:
        OSError: the file cannot be read.
    """
    scan = ContentScan(name or path.name)
    with open(path, "rb") as handle:
        while (chunk := handle.read(CHUNK)) and scan.feed(chunk) is None:
            pass
    return scan.reason


def credential_reason(path: Path) -> str | None:
    """Why the file at `path` looks like a credential, by its name or its content, or None."""
    return name_reason(path.name, False) or content_reason(path)
