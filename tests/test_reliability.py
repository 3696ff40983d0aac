"""#32 inputs that gave a traceback, left something behind or taught one thing per run: each is one line now, and
nothing is uploaded, written or left in a temporary folder."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mlsubmit.cli import app

pytest_plugins = ["support.training_emulator", "support.submit_cli"]
ROOT = Path(__file__).resolve().parent.parent


def _mlsubmit(*args: str, env: dict, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlsubmit", *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=cwd or ROOT)


def _bare_env(tmp_path: Path) -> dict:
    """No project, region or bucket from anywhere: no MLSUBMIT_*/CLOUDSDK_* variables, an empty gcloud config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLSUBMIT_", "CLOUDSDK_"))}
    return {**env, "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"), "NO_COLOR": "1",
            "MLSUBMIT_HOME": str(tmp_path / "home")}


def test_a_dry_run_without_project_region_and_bucket_names_all_three_in_one_line(tmp_path):
    done = _mlsubmit("train", "--package-path", "trainer", "--dry-run", env=_bare_env(tmp_path))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "error: no project, region or staging bucket set for the cloud job; pass --project PROJECT, --region REGION, "
        "--staging-bucket gs://BUCKET, or export MLSUBMIT_PROJECT=PROJECT, MLSUBMIT_REGION=REGION, "
        "MLSUBMIT_STAGING_BUCKET=gs://BUCKET"]
    with_dir = _mlsubmit("train", "--package-path", "trainer", "--dry-run", "--job-dir", "gs://my-bucket/run",
                         env=_bare_env(tmp_path))  # a gs:// job dir stands in for the bucket
    assert with_dir.stderr.splitlines()[-1].startswith("error: no project or region set for the cloud job")


@pytest.mark.parametrize("verb", ["describe", "cancel", "logs", "wait"])
def test_an_unknown_job_named_by_its_resource_name_is_one_line(verb, cloud):
    name = f"projects/{cloud.project}/locations/us-central1/customJobs/1234567890123456789"
    done = cloud.run("jobs", verb, name)
    assert done.code == 2, done.stderr
    assert done.stderr.splitlines() == [f"error: no Vertex AI custom job {name!r} in projects/{cloud.project}/"
                                        "locations/us-central1; see `mlsubmit jobs list --api vertex`; for a job on "
                                        "the other API add --api legacy"]


def test_train_against_an_endpoint_that_does_not_answer_uploads_nothing(cloud, task_project):
    with socket.socket() as taken:  # a port of 127.0.0.1 that nothing serves
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
    done = cloud.run("train", "--package-path", task_project, "--python-module", "tinypkg.task", "--skip-preflight",
                     "--job-name", "nowhere", "--endpoint", f"http://127.0.0.1:{port}", MLSUBMIT_RETRY_DEADLINE="2")
    assert done.code == 2, done.stderr
    assert done.stderr.splitlines()[-1].startswith(f"error: cannot list Vertex AI custom jobs: no answer from "
                                                   f"http://127.0.0.1:{port} within ")
    assert "package" not in done.stderr and cloud.objects() == []  # nothing staged


def test_the_emulator_skips_a_job_record_without_its_times_and_leaves_no_temp_folder_on_a_busy_port(
        tmp_path, gcs_emulator):
    from support.training_emulator import TrainingEmulator

    data = tmp_path / "data"
    (data / "jobs").mkdir(parents=True)
    (data / "jobs" / "x.json").write_text(json.dumps({
        "name": "projects/p/locations/us-central1/customJobs/1", "api": "vertex", "job_id": "1", "project": "p",
        "body": {}, "state": "SUCCEEDED"}))
    with TrainingEmulator(gcs_endpoint=gcs_emulator.endpoint, home=tmp_path / "home", data_dir=data) as emulator:
        said = emulator.stderr_path.read_text()
        assert "warning: skipped a damaged file in --data-dir: " in said and "x.json: expected an RFC 3339 " \
            "timestamp" in said, said
        port = int(emulator.endpoint.rsplit(":", 1)[1])
        scratch = tmp_path / "tmp"
        scratch.mkdir()
        busy = _mlsubmit("emulator", "--port", str(port), "--gcs-endpoint", gcs_emulator.endpoint,
                         env={**os.environ, "TMPDIR": str(scratch), "NO_COLOR": "1"})
        assert busy.returncode == 2 and busy.stderr.splitlines()[-1].startswith(
            f"error: invalid value for --port: received {port}; expected a free port of 127.0.0.1"), busy.stderr
        assert list(scratch.iterdir()) == []  # no empty work folder left behind


def test_a_manifest_nested_fifty_thousand_deep_is_one_line(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    (job / "MANIFEST.json").write_text("[" * 50_000 + "]" * 50_000)
    import numpy as np

    np.savez(tmp_path / "x.npz", x_test=np.zeros((2, 4), dtype="float32"))
    result = CliRunner().invoke(app, ["predict", str(job), "-i", str(tmp_path / "x.npz")])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [f"error: job dir {job} is corrupt: MANIFEST.json cannot be read (nested too "
                                          "deeply to be a manifest); a file changed after training; re-run training "
                                          "or restore the file"]


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to connect as another user")
def test_the_emulator_serves_only_its_own_user(cloud):
    """It runs every job it accepts as the user who started it: another local account (nobody) is refused, before
    anything is read, with Google's error JSON."""
    port = int(cloud.emulator.endpoint.rsplit(":", 1)[1])
    client = ("import socket\n"
              f"s = socket.create_connection(('127.0.0.1', {port}))\n"
              "s.sendall(b'POST /v1/projects/p/locations/us-central1/customJobs HTTP/1.1\\r\\nHost: x\\r\\n"
              "Content-Type: application/json\\r\\nContent-Length: 2\\r\\n\\r\\n{}')\n"
              "answer = b''\n"
              "while True:\n"
              "    chunk = s.recv(65536)\n"
              "    if not chunk:\n"
              "        break\n"
              "    answer += chunk\n"
              "print(answer.decode())\n")  # until the server closes: headers and body may come apart

    def nobody() -> None:
        os.setgid(65534)
        os.setuid(65534)

    python = next(p for p in ("/usr/bin/python3", "/usr/local/bin/python3") if os.path.exists(p))
    done = subprocess.run([python, "-I", "-S", "-c", client], preexec_fn=nobody, capture_output=True, text=True,
                          timeout=30)
    assert done.stdout.startswith("HTTP/1.1 403 Forbidden"), done
    assert '"status": "PERMISSION_DENIED"' in done.stdout and "serves only the user who started it" in done.stdout
    assert cloud.vertex_jobs() == []  # and as the emulator's own user, it answers


@pytest.fixture
def silent_index():
    """A package index that accepts connections and never answers: pip waits on it (until its 15 s timeout), so a
    signal surely lands while pip runs."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    yield f"http://127.0.0.1:{server.getsockname()[1]}/simple"
    server.close()


def _needs_index(tmp_path: Path) -> str:
    """A tiny package that requires a distribution no environment here has: installing it asks the index."""
    from support.tiny_package import make_project

    package = make_project(tmp_path / "proj")
    setup = package.parent / "setup.py"
    setup.write_text(setup.read_text().replace("setup(", "setup(install_requires=['mlsubmit-no-such-dist-32'], ", 1))
    return str(package)


def _pips(marker: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if " pip " in f" {command} " and marker.encode() in environ:
            found.append(command)
    return found


def test_sigterm_while_pip_runs_ends_in_one_line_and_leaves_nothing(tmp_path, silent_index):
    import signal
    import time

    scratch, home = tmp_path / "tmp", tmp_path / "home"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch), "MLSUBMIT_HOME": str(home), "PIP_INDEX_URL": silent_index,
           "NO_COLOR": "1", "MLSUBMIT_SIGTERM_CASE": tmp_path.name}
    process = subprocess.Popen([sys.executable, "-m", "mlsubmit", "train", "--local", "--package-path",
                                _needs_index(tmp_path), "--python-module", "tinypkg.task", "--job-dir",
                                str(tmp_path / "job")], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=env, cwd=tmp_path)
    deadline = time.monotonic() + 60
    while not _pips(tmp_path.name):
        assert time.monotonic() < deadline and process.poll() is None, process.communicate()
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    out, err = process.communicate(timeout=30)
    assert process.returncode == 143, err
    assert err.strip().splitlines()[-1] == ("error: stopped by SIGTERM; nothing half-made was kept; run the command "
                                            "again to start over")
    assert _pips(tmp_path.name) == []  # pip stopped with it
    assert list(scratch.iterdir()) == []  # nor pip's temporary folders (pip-unpack-*, …) left
    half_made = [p for p in home.rglob("*") if p.name.startswith((".building-", ".installing-"))]
    assert half_made == []


def test_the_emulator_stops_at_once_while_a_job_prepares_and_the_job_says_why(tmp_path, gcs_emulator,
                                                                           silent_index, monkeypatch):
    import time

    from support.training_emulator import TrainingEmulator, stage_package

    monkeypatch.setenv("PIP_INDEX_URL", silent_index)
    monkeypatch.setenv("MLSUBMIT_SIGTERM_CASE", tmp_path.name)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    gcs_emulator.create_bucket("sigterm-prep")
    uri = stage_package(Path(_needs_index(tmp_path)), gcs_emulator.endpoint, "sigterm-prep")
    from mlsubmit.jobspec.requests import vertex_custom_job
    from mlsubmit.jobspec.spec import JobSpec, Pool

    emulator = TrainingEmulator(gcs_endpoint=gcs_emulator.endpoint, home=tmp_path / "home",
                                data_dir=tmp_path / "data").start()
    try:
        body = vertex_custom_job(JobSpec(tier="CUSTOM", chief=Pool("chief", "n1-standard-4"), job_name="prep",
                                         package_uris=(uri,), python_module="tinypkg.task"))
        name = emulator.vertex_jobs().create(parent="projects/p-sig/locations/us-central1", body=body).execute()["name"]
        deadline = time.monotonic() + 60
        while not _pips(tmp_path.name):
            assert time.monotonic() < deadline, emulator.vertex_jobs().get(name=name).execute()
            time.sleep(0.1)
        started = time.monotonic()
        assert emulator.stop() == 0
        assert time.monotonic() - started < 3  # the README's promise
    finally:
        emulator.stop()
    assert _pips(tmp_path.name) == []
    assert list(scratch.iterdir()) == []
    (record,) = [json.loads(p.read_text()) for p in (tmp_path / "data" / "jobs").glob("*.json")]
    assert record["state"] == "FAILED" and "stopped while this job was PREPARING" in record["error"]


def test_a_full_disk_anywhere_is_one_line(tmp_path):
    """Outside environment builds too (here the sdist `mlsubmit package` writes): a real full tmpfs in a private
    mount namespace, one line naming the folder that is full (not MLSUBMIT_HOME), exit 1, and the folders made for
    the sdist removed again."""
    from test_cache import _private_mount_prefix

    prefix = _private_mount_prefix()
    if prefix is None:
        pytest.skip("no private mount namespace with a tmpfs here: no real full disk to write on")
    from support.tiny_package import make_project

    package = make_project(tmp_path / "proj")
    disk = tmp_path / "disk"
    disk.mkdir()
    script = f"""
mount -t tmpfs -o size=64k tmpfs {disk} || exit 9
dd if=/dev/zero of={disk}/filler bs=4k count=100 2>/dev/null
{sys.executable} -m mlsubmit package --package-path {package} --skip-preflight --dist-dir {disk}/new/dist \
    > {tmp_path}/out 2> {tmp_path}/err
echo $? > {tmp_path}/rc
ls -A {disk} > {tmp_path}/left
"""
    subprocess.run([*prefix, "sh", "-c", script], check=True, timeout=120, cwd=tmp_path,
                   env={**os.environ, "NO_COLOR": "1"})
    err = (tmp_path / "err").read_text().strip().splitlines()
    assert (tmp_path / "rc").read_text().strip() == "1", err
    assert err == [f"error: out of disk space writing tinypkg-1.2.0.tar.gz into {disk}/new/dist (No space left on "
                   f"device); free space on the disk that holds {disk}/new/dist, or pass --dist-dir DIR on another "
                   "disk"], err
    assert (tmp_path / "left").read_text().split() == ["filler"]  # no empty dist dir (nor its parent) left behind
