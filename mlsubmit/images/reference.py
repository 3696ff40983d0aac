"""Whether a string is a container image reference a registry can serve: the one check of every image flag.

The grammar is the OCI distribution spec's and docker/distribution's `reference` package's (reference.go, read
2026-12; the OCI distribution spec v1.1, "Pulling manifests"):

    reference        := name [ ":" tag ] [ "@" digest ]
    name             := [ domain "/" ] path-component [ "/" path-component ]*
    domain           := host [ ":" port ]          host: DNS components of [A-Za-z0-9-], or [IPv6]
    path-component   := [a-z0-9]+ ( ( "." | "_" | "__" | "-"+ ) [a-z0-9]+ )*
    tag              := [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}            (at most 128 characters)
    digest           := algorithm ":" hex          sha256: 64, sha512: 128 lowercase hex digits (go-digest)

and the name (domain and path, without tag or digest) is at most 255 characters (`NameTotalLengthMax`; the OCI
spec: "many clients impose a limit of 255 characters" on it). A value outside the grammar never reaches a
registry: Vertex AI refuses it as an `imageUri`, and a shell or a YAML file would read parts of it as something
else (`gcr.io/x/y:1;touch /tmp/x`).

Example:
    >>> check("us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-6:latest", "--executor-image")
    >>> problem("gcr.io/x/y:1;touch /tmp/x")
    "';' is not a character of image references"
"""

from __future__ import annotations

import re

from mlsubmit.errors import invalid_value

MAX_NAME = 255  # docker/distribution NameTotalLengthMax: the domain and path, without tag or digest
MAX_TAG = 128
DIGEST_LENGTHS = {"sha256": 64, "sha512": 128}  # go-digest's algorithms, hex digits each
EXAMPLE = "us-docker.pkg.dev/PROJECT/REPOSITORY/IMAGE:TAG"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_DOMAIN = r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:.]+\])" \
          r"(?::[0-9]+)?"
_NAME = re.compile(rf"(?:{_DOMAIN}/)?{_COMPONENT}(?:/{_COMPONENT})*")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_DIGEST = re.compile(r"([a-z0-9]+(?:[+._-][a-z0-9]+)*):([0-9a-f]+)")
_ALLOWED = re.compile(r"[A-Za-z0-9_.:/@\[\]+-]")


def _split(text: str) -> tuple[str, str | None, str | None]:
    """(name, tag, digest) of a reference: the digest after '@', the tag after the last ':' past the last '/'."""
    name, _, digest = text.partition("@")
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        return name[:colon], name[colon + 1:], digest if "@" in text else None
    return name, None, digest if "@" in text else None


def problem(text: str) -> str | None:
    """What makes `text` no image reference, in words; None when it is one."""
    if not text:
        return "an empty reference names no image"
    odd = next((c for c in text if not _ALLOWED.fullmatch(c)), None)
    if odd is not None:
        return f"{odd!r} is not a character of image references" if odd.isascii() else \
            f"image references are ASCII; {odd!r} is not"
    name, tag, digest = _split(text)
    if len(name) > MAX_NAME:
        return f"its name is {len(name):,} characters; registries take at most {MAX_NAME}"
    if not _NAME.fullmatch(name):
        if _NAME.fullmatch(name.lower()):
            return "the repository path must be lowercase"
        return ("its name is not [HOST[:PORT]/]PATH with lowercase path components of letters and digits joined "
                "by '.', '_', '__' or '-'")
    if tag is not None and len(tag) > MAX_TAG:
        return f"its tag is {len(tag):,} characters; registries take at most {MAX_TAG}"
    if tag is not None and not _TAG.fullmatch(tag):
        return (f"its tag {tag!r} is not 1 to {MAX_TAG} letters, digits, '_', '.' or '-' (not starting with "
                "'.' or '-')")
    if digest is not None:
        found = _DIGEST.fullmatch(digest)
        algorithm = found.group(1) if found else ""
        if algorithm not in DIGEST_LENGTHS or len(found.group(2)) != DIGEST_LENGTHS[algorithm]:
            return "its digest is not sha256:<64 hex digits> or sha512:<128 hex digits>"
    return None


def check(text: object, field: str) -> None:
    """UsageError (one line, naming `field`) unless `text` is an image reference a registry can serve."""
    said = problem(text) if isinstance(text, str) else "it is not text"
    if said is not None:
        raise invalid_value(field, text, f"an image reference [HOST[:PORT]/]PATH[:TAG][@DIGEST] (the OCI "
                            f"distribution grammar): {said}", hint=f"e.g. {EXAMPLE}")
