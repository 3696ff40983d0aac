"""mlsubmit.images.reference: the one check of every image flag, against the OCI distribution grammar and a
registry's limits (docker/distribution's NameTotalLengthMax 255, tags of at most 128 characters)."""

from __future__ import annotations

import pytest

from mlsubmit.images import catalog
from mlsubmit.images.reference import problem


def test_every_image_mlsubmit_knows_is_a_reference_it_accepts():
    uris = [image.uri for image in catalog.IMAGES]
    assert uris and [uri for uri in uris if problem(uri) is not None] == []


@pytest.mark.parametrize("text", [
    "tensorflow/tensorflow:2.21.0-gpu", "localhost:5000/team/trainer", "[::1]:5000/a", "UPPER.example.com/a/b:TAG_1",
    "gcr.io/p/a__b--c.d_e:1", "us-docker.pkg.dev/p/r/i@sha256:" + "0" * 64,
    "gcr.io/p/i:v1@sha512:" + "f" * 128, "a" * 255, "a:" + "t" * 128])
def test_references_a_registry_serves_are_accepted(text):
    assert problem(text) is None


@pytest.mark.parametrize("text, says", [
    ("", "an empty reference names no image"),
    ("gcr.io/x/y:1;touch /tmp/INJECTED", "';' is not a character"),
    ("gcr.io/x/$(id)", "'$' is not a character"),
    ("gcr.io/x/\u0430", "image references are ASCII"),  # a Cyrillic a
    ("a" * 256, "its name is 256 characters; registries take at most 255"),
    ("a:" + "t" * 129, "its tag is 129 characters"),
    ("gcr.io/x/Y", "the repository path must be lowercase"),
    ("gcr.io//y", "its name is not"), ("x/", "its name is not"), ("gcr.io/x/a..b", "its name is not"),
    ("x:-1", "its tag '-1' is not"), ("x:", "its tag '' is not"),
    ("x@sha256:abc", "its digest is not"), ("x@md5:" + "0" * 32, "its digest is not"),
])
def test_what_is_no_reference_is_named(text, says):
    assert says in (problem(text) or ""), problem(text)
