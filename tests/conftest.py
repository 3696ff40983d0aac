"""Shared fixtures: a real fake-gcs-server process for the session, a fresh bucket per test, isolated state."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Quiet TensorFlow's C++ start-up chatter in every subprocess the tests start.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Local runs and emulator jobs (started by session fixtures too) use mlsubmit's own environment; the image tests
# turn image environments on for their own processes.
os.environ.setdefault("MLSUBMIT_IMAGE_ENV", "0")

# no process the suite starts outlives its test or the session; the heaviest test files are handed out first;
# TensorFlow-only files start their processes without the venv's other frameworks (support/without_frameworks.py)
pytest_plugins = ["support.leftovers", "support.image_cache", "support.ordering", "support.quick_tier",
                  "support.temp_folder", "support.without_frameworks"]  # leftovers first: the others import it


@pytest.fixture(scope="session")
def gcs_emulator():
    """A real fake-gcs-server on 127.0.0.1, started once for the session and stopped at its end."""
    from mlsubmit.emulator.gcs_emulator import GcsEmulator

    with GcsEmulator() as emulator:
        yield emulator


@pytest.fixture
def gcs(gcs_emulator, monkeypatch):
    """Point this test (and the subprocesses it starts) at the emulator; yields (emulator, fresh bucket name)."""
    for key, value in gcs_emulator.env().items():
        monkeypatch.setenv(key, value)
    bucket = f"test-{uuid.uuid4().hex[:12]}"
    gcs_emulator.create_bucket(bucket)
    yield gcs_emulator, bucket


@pytest.fixture(scope="session")
def images_home(tmp_path_factory):
    """One $MLSUBMIT_IMAGES for the suite: image metadata, image environments and pre-flight results are
    content-addressed (an image's environment by its pins and Python, a check by the sdist's sha256), so they are
    kept between runs like pip's own cache (an image environment takes minutes to build): in
    $MLSUBMIT_TEST_IMAGES, default ~/.cache/mlsubmit/test-images; what no run used for two weeks is pruned at the
    end of a session (support/image_cache.py)."""
    from support.image_cache import images_home as kept

    return kept()


@pytest.fixture(autouse=True)
def _isolated_user_state(tmp_path_factory, monkeypatch, images_home):
    """Keep every test's user state (caches, config) out of the real home directory. Local runs use mlsubmit's
    own environment unless a test turns image environments on (MLSUBMIT_IMAGE_ENV=1)."""
    monkeypatch.setenv("MLSUBMIT_IMAGES", str(images_home))
    monkeypatch.setenv("MLSUBMIT_IMAGE_ENV", "0")
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("MLSUBMIT_HOME", str(home / ".mlsubmit"))
    monkeypatch.setenv("KERAS_HOME", str(home / ".keras"))
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(home / "gcloud"))


def python() -> str:
    return sys.executable
