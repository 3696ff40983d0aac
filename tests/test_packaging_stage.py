"""Staging against a real fake-gcs-server (and a fault proxy in front of it), and to a plain directory."""

from __future__ import annotations

import json
import os
import threading
import urllib.request
from pathlib import Path

import pytest
from support.fault_proxy import FaultProxy, is_upload
from support.tiny_package import make_project

from mlsubmit.cloud import storage
from mlsubmit.errors import OperationFailed, UsageError
from mlsubmit.packaging import build_sdist, package_uri, stage

FAST = storage.RetryPolicy(initial=0.01, maximum=0.05, deadline=5, probe_deadline=1)


@pytest.fixture(scope="module")
def sdist(tmp_path_factory):
    root = tmp_path_factory.mktemp("stage")
    return build_sdist(make_project(root / "proj"), dist_dir=root / "dist")


def object_bytes(emulator, uri: str) -> bytes | None:
    """Read an object straight from the emulator's JSON API (not through the code under test)."""
    bucket, name = storage.split_gcs(uri)
    url = f"{emulator.endpoint}/storage/v1/b/{bucket}/o/{urllib.request.quote(name, safe='')}?alt=media"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.read()
    except urllib.error.HTTPError as err:
        if err.code == 404:
            return None
        raise


def put_object(emulator, uri: str, data: bytes) -> None:
    bucket, name = storage.split_gcs(uri)
    url = f"{emulator.endpoint}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={urllib.request.quote(name)}"
    urllib.request.urlopen(urllib.request.Request(url, data=data, method="POST"), timeout=5).close()


def test_stage_uploads_once_then_sends_nothing(gcs, sdist, monkeypatch):
    emulator, bucket = gcs
    with FaultProxy(emulator.endpoint) as proxy:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.endpoint)
        first = stage(sdist, f"gs://{bucket}/jobs/run1", retry=FAST)
        assert first.uri == f"gs://{bucket}/jobs/run1/packages/{sdist.sha256}/tinypkg-1.2.0.tar.gz"
        assert (first.uploaded, first.bytes_sent, first.sha256) == (True, sdist.size, sdist.sha256)
        uploads_before = len(proxy.outcomes(is_upload))
        second = stage(sdist, f"gs://{bucket}/jobs/run1/", retry=FAST)
        assert (second.uri, second.uploaded, second.bytes_sent) == (first.uri, False, 0)
        assert len(proxy.outcomes(is_upload)) == uploads_before == 1  # not a byte sent the second time
    assert object_bytes(emulator, first.uri) == sdist.path.read_bytes()


@pytest.mark.parametrize("faults, when", [
    ([503, 503, 503], is_upload),
    (["reset", 503, "reset"], is_upload),
    (["reset", 429, 500, 408, "reset"], None),  # metadata look-ups fail too
])
def test_transient_faults_are_retried_and_the_bucket_holds_the_file(gcs, sdist, monkeypatch, faults, when):
    emulator, bucket = gcs
    with FaultProxy(emulator.endpoint, faults, when=when) as proxy:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.endpoint)
        staged = stage(sdist, f"gs://{bucket}/p", retry=FAST)
        injected = [o for o in proxy.outcomes() if not o.startswith("passed")]
    assert injected == [str(f) for f in faults]
    assert staged.uploaded and object_bytes(emulator, staged.uri) == sdist.path.read_bytes()


def test_an_upload_failing_after_retries_is_exit_1_and_leaves_nothing(gcs, sdist, monkeypatch):
    emulator, bucket = gcs
    policy = storage.RetryPolicy(initial=0.01, maximum=0.02, deadline=0.5, probe_deadline=0.5)
    with FaultProxy(emulator.endpoint, then=503, when=is_upload) as proxy:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.endpoint)
        with pytest.raises(OperationFailed) as err:
            stage(sdist, f"gs://{bucket}/p", retry=policy)
    assert err.value.exit_code == 1 and "failed after retrying" in err.value.one_line()
    assert len(proxy.outcomes(is_upload)) > 2
    assert object_bytes(emulator, package_uri(sdist, f"gs://{bucket}/p")) is None


def test_missing_bucket_refused_access_and_unreachable_endpoint_are_exit_2(gcs, sdist, monkeypatch):
    emulator, bucket = gcs
    with pytest.raises(UsageError, match="bucket gs://no-such-bucket-here does not exist") as err:
        stage(sdist, "gs://no-such-bucket-here/p", retry=FAST)
    assert err.value.exit_code == 2
    with FaultProxy(emulator.endpoint, then=403) as proxy:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.endpoint)
        with pytest.raises(UsageError, match=f"access to gs://{bucket} refused \\(403\\)"):
            stage(sdist, f"gs://{bucket}/p", retry=FAST)
    # the proxy has stopped: nothing listens on its port now
    with pytest.raises(UsageError, match="cannot reach Cloud Storage"):
        stage(sdist, f"gs://{bucket}/p", retry=FAST)
    with pytest.raises(UsageError, match="bucket"):
        stage(sdist, "gs://Bad_Bucket/p")
    with pytest.raises(UsageError, match="--stage"):
        stage(sdist, "s3://bucket/p")


def test_a_checksum_mismatch_after_upload_deletes_the_object_and_is_exit_1(gcs, sdist, monkeypatch):
    emulator, bucket = gcs

    def misreport_crc32c(method: str, path: str, body: bytes) -> bytes:
        if not is_upload(method, path):
            return body
        document = json.loads(body)
        document["crc32c"] = "AAAAAA=="
        return json.dumps(document).encode()

    with FaultProxy(emulator.endpoint, rewrite=misreport_crc32c) as proxy:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.endpoint)
        with pytest.raises(OperationFailed, match="does not match") as err:
            stage(sdist, f"gs://{bucket}/bad", retry=FAST)
    assert err.value.exit_code == 1
    assert object_bytes(emulator, package_uri(sdist, f"gs://{bucket}/bad")) is None  # nothing left behind


def test_a_concurrent_writer_is_never_overwritten(gcs, sdist, monkeypatch):
    emulator, bucket = gcs
    prefix = f"gs://{bucket}/race"
    uri = package_uri(sdist, prefix)
    wrote = threading.Event()

    def writer_gets_there_first(method: str, path: str) -> bool:
        if is_upload(method, path) and not wrote.is_set():
            put_object(emulator, uri, sdist.path.read_bytes())  # same bytes, written between our look-up and upload
            wrote.set()
        return False

    with FaultProxy(emulator.endpoint, when=writer_gets_there_first) as proxy:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.endpoint)
        staged = stage(sdist, prefix, retry=FAST)
    assert wrote.is_set() and "passed 412" in proxy.outcomes(is_upload)  # if_generation_match=0 refused ours
    assert staged.uri == uri and object_bytes(emulator, uri) == sdist.path.read_bytes()
    assert not staged.uploaded  # the object there is the other writer's (same bytes): fine, not ours

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", emulator.endpoint)
    other = f"gs://{bucket}/other"
    put_object(emulator, package_uri(sdist, other), b"something else")
    with pytest.raises(OperationFailed, match="already exists with different content"):
        stage(sdist, other, retry=FAST)
    assert object_bytes(emulator, package_uri(sdist, other)) == b"something else"


def test_a_plain_directory_is_a_stage(sdist, tmp_path):
    staged = stage(sdist, str(tmp_path / "stage"))
    target = Path(staged.uri)
    assert target == tmp_path / "stage" / "packages" / sdist.sha256 / sdist.filename
    assert target.read_bytes() == sdist.path.read_bytes() and staged.bytes_sent == sdist.size
    again = stage(sdist, str(tmp_path / "stage"))
    assert (again.uploaded, again.bytes_sent) == (False, 0)
    assert [p.name for p in target.parent.iterdir()] == [sdist.filename]  # no partial files left
    target.write_bytes(b"tampered")
    with pytest.raises(OperationFailed, match="different content"):
        stage(sdist, str(tmp_path / "stage"))
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(UsageError) as err:
        stage(sdist, str(tmp_path / "a-file"))
    assert "--stage" in err.value.one_line() and "it is a file" in err.value.one_line()


def test_storage_round_trip_through_get_file(gcs, sdist, tmp_path):
    _, bucket = gcs
    uri = f"gs://{bucket}/copy/{sdist.filename}"
    storage.put_file(sdist.path, uri, retry=FAST)
    info = storage.stat(uri, retry=FAST)
    assert info.size == sdist.size and info.checksums.agrees_with(storage.file_checksums(sdist.path))
    back = storage.get_file(uri, tmp_path / "back" / "x.tar.gz", retry=FAST)
    assert back.read_bytes() == sdist.path.read_bytes()
    assert storage.stat(f"gs://{bucket}/copy/none", retry=FAST) is None
    with pytest.raises(UsageError, match="no object at"):
        storage.get_file(f"gs://{bucket}/copy/none", tmp_path / "none", retry=FAST)


def test_a_large_file_goes_up_in_resumable_chunks_through_faults(gcs, tmp_path, monkeypatch):
    emulator, bucket = gcs
    big = tmp_path / "big.tar.gz"
    big.write_bytes(os.urandom(9 * 1024 * 1024 + 7))  # above the multipart limit: a resumable upload
    monkeypatch.setattr(storage, "_PROGRESS_AFTER", 0.0)  # show the progress bar at once
    with FaultProxy(emulator.endpoint, [503, "reset"], when=lambda method, path: method == "PUT") as proxy:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.endpoint)
        put = storage.put_file(big, f"gs://{bucket}/big/{big.name}", retry=FAST, show_progress=True)
        chunks = proxy.outcomes(lambda method, path: method == "PUT")
    assert chunks[:2] == ["503", "reset"] and "passed 308" in chunks  # 308: chunk accepted, more to come
    assert put.uploaded and put.bytes_sent >= big.stat().st_size
    assert object_bytes(emulator, put.uri) == big.read_bytes()
