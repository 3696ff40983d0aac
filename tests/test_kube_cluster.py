"""Jobs on the emulated Kubernetes API (mlsubmit.emulator.kube_api), driven three ways: `mlsubmit train --target
kubernetes` (the official client and a kubeconfig), the real `/usr/bin/kubectl` applying `mlsubmit config --format
kubernetes`, and the `kubernetes` Python client reading what ran. Every pod is a local process through the launcher."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mlsubmit.emulator.kube_api import KubeServer
from tests.support.engine_checks import ROOT, TRAINERS, job_processes, lines

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


@pytest.fixture(scope="module")
def kube(tmp_path_factory):
    server = KubeServer().start()
    folder = tmp_path_factory.mktemp("kube")
    config = folder / "kubeconfig"
    config.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "emu",
        "clusters": [{"name": "emu", "cluster": {"server": server.url}}],
        "users": [{"name": "emu", "user": {}}],
        "contexts": [{"name": "emu", "context": {"cluster": "emu", "user": "emu"}}]}))
    server.kubeconfig = config
    yield server
    server.stop()


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return tmp_path_factory.mktemp("home")


def _mlsubmit(kube, home, cwd, *args, timeout=300):
    env = {**os.environ, "NO_COLOR": "1", "MLSUBMIT_HOME": str(home), "KUBECONFIG": str(kube.kubeconfig)}
    return subprocess.run([sys.executable, "-m", "mlsubmit", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _kubectl(kube, *args, timeout=60):
    return subprocess.run([KUBECTL, "--server", kube.url, *args], capture_output=True, text=True, timeout=timeout)


def test_the_bundled_trainer_as_chief_and_worker_in_sync(kube, home, tmp_path):
    done = _mlsubmit(kube, home, tmp_path, "train", "--target", "kubernetes", "--package-path", str(ROOT / "trainer"),
                     "--workers", "1", "--job-name", "sync_job", "--job-dir", "job", "--", "--data",
                     "synthetic:8x8x1:4:256", "--epochs", "1", "--batch-size", "16", "--steps-per-epoch", "3")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "job sync-job created in namespace default" in done.stdout
    digests = {r: re.search(r"weights sha256 (\w+)", "\n".join(lines(done.stdout, r))).group(1)
               for r in ("chief-0", "worker-0")}
    assert digests["chief-0"] == digests["worker-0"]
    metrics = json.loads((tmp_path / "job" / "metrics.json").read_text())
    assert (metrics["strategy"], metrics["weights_sha256"]) == ("multi_worker_mirrored", digests["chief-0"])
    assert re.search(r"job sync-job SUCCEEDED in [\d.]+ s on kubernetes:", done.stdout)
    # a re-run of the same submission makes no second job: it finds this one by its request id
    again = _mlsubmit(kube, home, tmp_path, "train", "--target", "kubernetes", "--package-path", str(ROOT / "trainer"),
                      "--workers", "1", "--job-name", "sync_job", "--job-dir", "job", "--", "--data",
                      "synthetic:8x8x1:4:256", "--epochs", "1", "--batch-size", "16", "--steps-per-epoch", "3")
    assert again.returncode == 0 and "job sync-job found (this submission ran before)" in again.stdout, again.stderr
    jobs = [k for k in kube.store.objects if k[0] == "jobs" and k[2].startswith("sync-job-")]
    assert sorted(name for _, _, name in jobs) == ["sync-job-chief", "sync-job-worker"]
    assert not job_processes("sync-job")


def _sdist(folder: Path, out: Path) -> Path:
    from mlsubmit import packaging

    return Path(packaging.write_sdist(packaging.plan_sdist(folder), out).path)


def test_a_users_trainer_through_kubectl_apply_and_the_python_client(kube, home, tmp_path):
    from kubernetes import client, config

    sdist = _sdist(TRAINERS / "vertex_strict" / "trainer", tmp_path / "dist")
    made = _mlsubmit(kube, home, tmp_path, "config", "--format", "kubernetes", "--tier", "CUSTOM", "--workers", "1",
                     "--job-name", "user_job", "--package-uris", str(sdist), "--", "--output_dir",
                     str(tmp_path / "out"))
    assert made.returncode == 0, made.stderr
    (tmp_path / "job.yaml").write_text(made.stdout)
    # the emulator serves no OpenAPI documents: kubectl's client-side schema check is off, ours ran in `config`
    applied = _kubectl(kube, "apply", "--validate=false", "-f", str(tmp_path / "job.yaml"))
    assert applied.returncode == 0, applied.stderr
    assert "job.batch/user-job-chief created" in applied.stdout and "service/user-job created" in applied.stdout
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        state = _kubectl(kube, "get", "job", "user-job-chief", "-o", "jsonpath={.status.conditions[*].type}").stdout
        if "Complete" in state or "Failed" in state:
            break
        time.sleep(1)
    assert "Complete" in state
    config.load_kube_config(config_file=str(kube.kubeconfig))
    core = client.CoreV1Api()
    pods = core.list_namespaced_pod("default", label_selector="mlsubmit.dev/job=user-job,mlsubmit.dev/role=worker")
    assert [p.metadata.labels["batch.kubernetes.io/job-completion-index"] for p in pods.items] == ["0"]
    log = core.read_namespaced_pod_log(pods.items[0].metadata.name, "default")
    assert "worker-0 starts python -m trainer.task" in log and "step 5/5" in log
    chief = _kubectl(kube, "get", "pods", "-l", "mlsubmit.dev/job=user-job,mlsubmit.dev/role=chief", "-o",
                     "jsonpath={.items[0].metadata.name}")
    logs = _kubectl(kube, "logs", chief.stdout.strip())
    assert "wrote " in logs.stdout and (tmp_path / "out" / "weights.json").is_file()
    listed = _mlsubmit(kube, home, tmp_path, "jobs", "list", "--api", "kubernetes", "--output", "json")
    assert {"job_id": "user-job", "state": "SUCCEEDED"}.items() <= next(
        j for j in json.loads(listed.stdout) if j["job_id"] == "user-job").items(), listed.stderr
    read = _mlsubmit(kube, home, tmp_path, "jobs", "logs", "user_job", "--api", "kubernetes", "--task", "worker-0")
    assert read.returncode == 0 and "step 5/5" in read.stdout and "chief-0" not in read.stdout, read.stderr
    deleted = _kubectl(kube, "delete", "-f", str(tmp_path / "job.yaml"))
    assert deleted.returncode == 0, deleted.stderr
    assert _kubectl(kube, "get", "pods", "-l", "mlsubmit.dev/job=user-job", "-o", "name").stdout.strip() == ""


def test_cancel_deletes_every_pod_and_process(kube, home, tmp_path):
    from tests.support.engine_checks import tiny_project

    package = tiny_project(tmp_path / "tiny")
    env = {**os.environ, "NO_COLOR": "1", "MLSUBMIT_HOME": str(home), "KUBECONFIG": str(kube.kubeconfig)}
    job = subprocess.Popen([sys.executable, "-m", "mlsubmit", "train", "--target", "kubernetes", "--package-path",
                            str(package), "--module-name", "tinypkg.task", "--ps", "1", "--workers", "1",
                            "--job-name", "cancel_job", "--", "--forever"], cwd=tmp_path, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = []
    try:
        for line in job.stdout:
            out.append(line)
            if line.startswith("[chief-0]") and "role chief 0" in line:
                break
        assert len(job_processes("cancel-job")) >= 3, "".join(out)
        cancelled = _mlsubmit(kube, home, tmp_path, "jobs", "cancel", "cancel_job", "--api", "kubernetes")
        assert cancelled.returncode == 0 and "CANCELLED" in cancelled.stdout, cancelled.stdout + cancelled.stderr
        code = job.wait(60)
        rest = job.stdout.read()
        assert code == 130, "".join(out) + rest
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    assert not [k for k in kube.store.objects if k[2].startswith("cancel-job")]
    deadline = time.monotonic() + 20
    while job_processes("cancel-job") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not job_processes("cancel-job")


@pytest.mark.parametrize("case", ["context", "namespace", "forbidden", "unreachable", "gpu"])
def test_bad_input_is_one_line_and_creates_nothing(kube, home, tmp_path, case):
    target, more = "kubernetes", []
    if case == "context":
        target = "kubernetes:nope"
    elif case == "namespace":
        more = ["--namespace", "ghost"]
    elif case == "gpu":
        more = ["--gpus", "1", "--gpu-type", "NVIDIA_TESLA_K80"]
    before = dict(kube.store.objects)
    env_config = kube.kubeconfig
    if case == "unreachable":
        dead = tmp_path / "kubeconfig"
        dead.write_text(kube.kubeconfig.read_text().replace(kube.url, "http://127.0.0.1:9"))
        kube.kubeconfig = dead
    kube.forbid = case == "forbidden"
    try:
        started = time.monotonic()
        done = _mlsubmit(kube, home, tmp_path, "train", "--target", target, "--package-path",
                         str(TRAINERS / "vertex_strict" / "trainer"), "--job-name", "bad_job", *more)
    finally:
        kube.forbid = False
        kube.kubeconfig = env_config
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stdout + done.stderr
    assert time.monotonic() - started < 15
    expected = {"context": "nope", "namespace": "namespace 'ghost' does not exist",
                "forbidden": "refuses to let you get",
                "unreachable": "cannot reach the Kubernetes API server", "gpu": "NVIDIA_TESLA_K80"}[case]
    assert expected in done.stderr
    assert kube.store.objects.keys() == before.keys()
