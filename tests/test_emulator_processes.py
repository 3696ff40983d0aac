"""Nothing outlives the emulator: SIGTERM while a job's package is being installed stops the install and the
emulator within seconds and leaves no half-built venv; `kill -KILL` of the emulator takes the fake-gcs-server it
started down with it; a venv build that was killed is cleaned up by the next one; a Kubernetes emulator killed so
leaves its kubeconfig (token, CA, key) only until the next one starts."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

from support.training_emulator import TrainingEmulator, stop_emulator_command

from mlsubmit.emulator.reaper import alive

pytest_plugins = ["support.training_emulator"]  # fixtures: emulator_home

IMAGE = "us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest"
SLOW_SETUP = '''\
import os, pathlib, time
pathlib.Path({mark!r}).write_text("%d %d" % (os.getpid(), os.getppid()))
time.sleep(120)
'''


def wait_until(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def slow_sdist(mark: Path) -> bytes:
    """An sdist whose setup.py records its pid and its parent's (pip's) in `mark`, then sleeps."""
    files = {"slowpkg-1.0/setup.py": SLOW_SETUP.format(mark=str(mark)),
             "slowpkg-1.0/PKG-INFO": "Metadata-Version: 2.1\nName: slowpkg\nVersion: 1.0\n",
             "slowpkg-1.0/slowpkg/__init__.py": ""}
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def upload(gcs_endpoint: str, bucket: str, name: str, data: bytes) -> str:
    request = urllib.request.Request(f"{gcs_endpoint}/upload/storage/v1/b/{bucket}/o?uploadType=media&name={name}",
                                     data=data, method="POST", headers={"Content-Type": "application/gzip"})
    urllib.request.urlopen(request, timeout=10).close()
    return f"gs://{bucket}/{name}"


def children_of(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(child) for child in (task / "children").read_text().split()]
    return found


def test_sigterm_while_a_package_installs_stops_pip_and_the_emulator_promptly(gcs_emulator, tmp_path):
    mark = tmp_path / "setup-py.pids"
    gcs_emulator.create_bucket("emu-slow-install")
    uri = upload(gcs_emulator.endpoint, "emu-slow-install", "slowpkg-1.0.tar.gz", slow_sdist(mark))
    home = tmp_path / "home"
    emulator = TrainingEmulator(gcs_endpoint=gcs_emulator.endpoint, home=home).start()
    try:
        pool = {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1",
                "pythonPackageSpec": {"executorImageUri": IMAGE, "packageUris": [uri], "pythonModule": "slowpkg.task"}}
        emulator.vertex_jobs().create(parent="projects/slow-project/locations/us-central1",
                                      body={"displayName": "slow", "jobSpec": {"workerPoolSpecs": [pool]}}).execute()
        wait_until(lambda: mark.exists() and mark.read_text().strip(), 60, "pip to run setup.py")
        pids = [int(pid) for pid in mark.read_text().split()]
        assert all(alive(pid) for pid in pids)
        started = time.monotonic()
        code = emulator.stop(signal.SIGTERM, timeout=30)
        took = time.monotonic() - started
    finally:
        emulator.stop(signal.SIGKILL)
    assert code == 0 and took < 3, f"exit code {code} after {took:.1f} s"
    wait_until(lambda: not any(alive(pid) for pid in pids), 5, "setup.py and pip to end")
    assert not list((home / "venvs").glob(".installing-*"))  # the half-built venv went with them


def test_kill_9_of_the_emulator_takes_its_fake_gcs_server_with_it_and_the_next_one_removes_its_folder(
        tmp_path, monkeypatch):
    from mlsubmit.emulator.executor import Executor
    from mlsubmit.emulator.store import Store
    from mlsubmit.local.children import popen_kwargs

    out, temporary = tmp_path / "emulator.out", tmp_path / "tmp"
    temporary.mkdir()
    with open(out, "w") as sink:
        emulator = subprocess.Popen([sys.executable, "-m", "mlsubmit", "emulator", "--port", "0", "--quiet"],
                                    stdout=sink, stderr=subprocess.STDOUT, cwd=tmp_path, **popen_kwargs(),
                                    env={**os.environ, "MLSUBMIT_HOME": str(tmp_path / "home"),
                                         "TMPDIR": str(temporary)})
    try:
        wait_until(lambda: "Cloud Storage: http" in out.read_text() or emulator.poll() is not None, 60, "start")
        gcs = [pid for pid in children_of(emulator.pid)
               if "fake-gcs-server" in Path(f"/proc/{pid}/cmdline").read_text()]
        assert len(gcs) == 1, out.read_text()
        emulator.send_signal(signal.SIGKILL)
        emulator.wait(timeout=10)
        wait_until(lambda: not alive(gcs[0]), 5, "fake-gcs-server to die with the emulator")
    finally:
        if emulator.poll() is None:
            emulator.kill()
            emulator.wait()
    killed = [p for p in temporary.iterdir() if p.name.startswith("mlsubmit-")]
    assert [p.name.split("-")[:3] for p in killed] == [["mlsubmit", "emulator", str(emulator.pid)]]  # one folder
    assert {p.name for p in killed[0].iterdir()} >= {"hptuning", "legacy-hptuning"}  # the tuning files within
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    next_one = Executor(Store(None), gcs_endpoint=None)  # the next emulator that starts without --data-dir
    try:
        assert [p.name for p in temporary.iterdir()] == [next_one.work_dir.name]
        assert next_one.work_dir.name.startswith(f"mlsubmit-emulator-{os.getpid()}-")
    finally:
        next_one.stop()
    assert not next_one.work_dir.exists()


def test_only_folders_whose_owner_is_gone_are_removed(tmp_path):
    from mlsubmit.emulator.reaper import owned_prefix, remove_abandoned

    mine = tmp_path / f"{owned_prefix('mlsubmit-emulator')}abc"  # this live process: kept
    pid, started, _ = mine.name.removeprefix("mlsubmit-emulator-").split("-", 2)
    reused = tmp_path / f"mlsubmit-emulator-{pid}-{int(started) + 1}-abc"  # same pid, another process: removed
    gone = tmp_path / "mlsubmit-emulator-4194304-1-abc"  # no such pid: removed
    other = [tmp_path / "mlsubmit-emulator-abc", tmp_path / "mlsubmit-kube-1-1-abc"]  # not ours to judge: kept
    for folder in (mine, reused, gone, *other):
        (folder / "jobs").mkdir(parents=True)
    assert remove_abandoned("mlsubmit-emulator", tmp_path) == sorted([reused, gone])
    assert sorted(tmp_path.iterdir()) == sorted([mine, *other])


BUILDER = '''\
import sys, time
from pathlib import Path

import pytest
from mlsubmit.local.venvs import _building
with _building(Path(sys.argv[1])) as building:
    print(building, flush=True)
    time.sleep(120)
'''


def test_a_venv_build_killed_mid_install_is_removed_by_the_next_install_and_a_live_one_is_kept(tmp_path):
    from mlsubmit.local.children import popen_kwargs
    from mlsubmit.local.venvs import remove_stale

    venvs = tmp_path / "venvs"
    venvs.mkdir()
    builders = [subprocess.Popen([sys.executable, "-c", BUILDER, str(venvs)], stdout=subprocess.PIPE, text=True,
                                 **popen_kwargs()) for _ in range(2)]
    try:
        killed, live = [Path(builder.stdout.readline().strip()) for builder in builders]
        builders[0].kill()  # SIGKILL: no `finally` runs, as when the emulator is killed mid-install
        builders[0].wait()
        assert killed.is_dir() and live.is_dir()
        assert remove_stale(venvs) == [killed]
        assert not killed.exists() and live.is_dir()  # another installer is still building that one
        assert sorted(p.name for p in venvs.iterdir()) == sorted([live.name, f"{live.name}.lock"])
    finally:
        for builder in builders:
            builder.kill()
            builder.wait()


def test_kill_9_of_the_kubernetes_emulator_leaves_its_credentials_only_until_the_next_start(tmp_path, gcs_emulator):
    pytest.importorskip("cryptography")
    from mlsubmit.local.children import popen_kwargs

    temporary = tmp_path / "tmp"
    temporary.mkdir()
    env = {**os.environ, "MLSUBMIT_HOME": str(tmp_path / "home"), "TMPDIR": str(temporary)}
    started = []
    try:
        for run in ("killed", "next"):
            out = tmp_path / f"{run}.out"
            with open(out, "w") as sink:
                started.append(subprocess.Popen(
                    [sys.executable, "-m", "mlsubmit", "emulator", "--port", "0", "--kube-port", "0", "--quiet",
                     "--gcs-endpoint", gcs_emulator.endpoint], stdout=sink, stderr=subprocess.STDOUT, cwd=tmp_path,
                    env=env, **popen_kwargs(default_sigint=True)))
            wait_until(lambda: "KUBECONFIG=" in out.read_text() or started[-1].poll() is not None, 60, "start")
            kubeconfig = Path(out.read_text().split("KUBECONFIG=", 1)[1].split()[0])
            assert "token" in kubeconfig.read_text() and kubeconfig.parent.parent == temporary, out.read_text()
            if run == "killed":
                left = kubeconfig.parent
                started[-1].send_signal(signal.SIGKILL)  # no `finally` runs: its folder stays
                started[-1].wait(timeout=10)
                assert left.name.startswith(f"mlsubmit-kube-{started[-1].pid}-") and kubeconfig.exists()
        assert not left.exists()  # the next start removed it: its owner is gone
        kube_folders = [p for p in temporary.iterdir() if p.name.startswith("mlsubmit-kube-")]
        assert kube_folders == [kubeconfig.parent]  # its own, and no other
    finally:
        for process in started:
            stop_emulator_command(process)
    assert not [p for p in temporary.iterdir() if p.name.startswith("mlsubmit-kube-")]  # stopped: removed its own
