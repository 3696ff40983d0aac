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
import yaml

from mlsubmit.emulator.kube_api import KubeServer
from tests.support.engine_checks import ROOT, TRAINERS, job_processes, lines

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


@pytest.fixture(scope="module")
def kube():
    server = KubeServer().start()  # server.kubeconfig: its https address, certificate and token, mode 0600
    yield server
    server.stop()


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return tmp_path_factory.mktemp("home")


EXIT_TASK = "import sys\nprint('exits with', sys.argv[-1], flush=True)\nsys.exit(int(sys.argv[-1]))\n"
TUNED_TASK = "from tinypkg.sub import model\n\nprint('reports with', model.REPORTER.__module__, flush=True)\n"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """One tiny package (no TensorFlow) for every test of the module that runs no training, each test choosing its
    module: the launcher on the module's node builds its venv once (3-4 CPU-s of pip a package) instead of once for
    each variant. tinypkg.task is engine_checks.TASK, tinypkg.exits exits with the code its last argument names,
    tinypkg.tuned imports cloudml-hypertune (which the image carries) in another module, declared nowhere."""
    from tests.support.engine_checks import tiny_project

    package = tiny_project(tmp_path_factory.mktemp("tiny"))
    (package / "exits.py").write_text(EXIT_TASK)
    (package / "sub" / "model.py").write_text("import hypertune\n\nREPORTER = hypertune.HyperTune\n")
    (package / "tuned.py").write_text(TUNED_TASK)
    return package


@pytest.fixture(autouse=True)
def _one_node(home, monkeypatch):
    """The emulated pods run on one node and inherit this process's environment: their launcher keeps its venvs in
    the module's home ($MLSUBMIT_HOME/launcher), as a real node keeps them from job to job, instead of building the
    same package's venv again in each test's own home."""
    monkeypatch.setenv("MLSUBMIT_HOME", str(home))


def _mlsubmit(kube, home, cwd, *args, timeout=300):
    env = {**os.environ, "NO_COLOR": "1", "MLSUBMIT_HOME": str(home), "KUBECONFIG": str(kube.kubeconfig)}
    return subprocess.run([sys.executable, "-m", "mlsubmit", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def _kubectl(kube, *args, timeout=60):
    return subprocess.run([KUBECTL, "--kubeconfig", str(kube.kubeconfig), *args], capture_output=True, text=True,
                          timeout=timeout)


def test_the_bundled_trainer_as_chief_and_worker_in_sync(kube, home, tmp_path):
    done = _mlsubmit(kube, home, tmp_path, "train", "--target", "kubernetes", "--package-path", str(ROOT / "trainer"),
                     "--workers", "1", "--job-name", "sync-job", "--job-dir", "job", "--", "--data",
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
                      "--workers", "1", "--job-name", "sync-job", "--job-dir", "job", "--", "--data",
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
                     "--job-name", "user-job", "--package-uris", str(sdist), "--", "--output_dir",
                     str(tmp_path / "out"))
    assert made.returncode == 0, made.stderr
    (tmp_path / "job.yaml").write_text(made.stdout)
    # kubectl's default --validate=strict: the emulator's OpenAPI v3 sends it to server-side field validation
    applied = _kubectl(kube, "apply", "-f", str(tmp_path / "job.yaml"))
    assert applied.returncode == 0, applied.stderr
    assert "job.batch/user-job-chief created" in applied.stdout and "service/user-job created" in applied.stdout
    # kubectl wait watches the Job (the emulator serves watch=true as the API server does) until it is Complete
    waited = _kubectl(kube, "wait", "--for=condition=Complete", "job/user-job-chief", "--timeout=120s", timeout=130)
    assert waited.returncode == 0 and "condition met" in waited.stdout, waited.stdout + waited.stderr + _kubectl(
        kube, "get", "job", "user-job-chief", "-o", "jsonpath={.status.conditions}").stdout
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
    read = _mlsubmit(kube, home, tmp_path, "jobs", "logs", "user-job", "--api", "kubernetes", "--task", "worker-0")
    assert read.returncode == 0 and "step 5/5" in read.stdout and "chief-0" not in read.stdout, read.stderr
    deleted = _kubectl(kube, "delete", "-f", str(tmp_path / "job.yaml"))
    assert deleted.returncode == 0, deleted.stderr
    assert _kubectl(kube, "get", "pods", "-l", "mlsubmit.dev/job=user-job", "-o", "name").stdout.strip() == ""


def test_cancel_deletes_every_pod_and_process(kube, home, tmp_path, tiny):
    package = tiny
    env = {**os.environ, "NO_COLOR": "1", "MLSUBMIT_HOME": str(home), "KUBECONFIG": str(kube.kubeconfig)}
    job = subprocess.Popen([sys.executable, "-m", "mlsubmit", "train", "--target", "kubernetes", "--package-path",
                            str(package), "--module-name", "tinypkg.task", "--ps", "1", "--workers", "1",
                            "--job-name", "cancel-job", "--", "--forever"], cwd=tmp_path, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    out = []
    try:
        for line in job.stdout:
            out.append(line)
            if line.startswith("[chief-0]") and "role chief 0" in line:
                break
        deadline = time.monotonic() + 20  # under load a replica's module may start a moment after the chief's line
        while len(job_processes("cancel-job")) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(job_processes("cancel-job")) >= 3, "".join(out)
        cancelled = _mlsubmit(kube, home, tmp_path, "jobs", "cancel", "cancel-job", "--api", "kubernetes")
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


@pytest.mark.parametrize("case", ["context", "namespace", "forbidden", "unreachable", "gpu", "no-jobset", "no-tfjob"])
def test_bad_input_is_one_line_and_creates_nothing(kube, home, tmp_path, case):
    target, more = "kubernetes", []
    if case == "context":
        target = "kubernetes:nope"
    elif case == "namespace":
        more = ["--namespace", "ghost"]
    elif case == "gpu":
        more = ["--gpus", "1", "--gpu-type", "NVIDIA_TESLA_K80"]
    elif case == "no-jobset":
        more = ["--k8s-api", "jobset"]
    elif case == "no-tfjob":  # the emulator runs no Training Operator
        more = ["--k8s-api", "tfjob"]
    before = dict(kube.store.objects)
    env_config = kube.kubeconfig
    if case == "unreachable":
        dead = tmp_path / "kubeconfig"
        dead.write_text(kube.kubeconfig.read_text().replace(kube.url, "http://127.0.0.1:9"))
        kube.kubeconfig = dead
    kube.forbid = case == "forbidden"
    kube.serve_jobsets, kube.serve_tfjobs = case != "no-jobset", case != "no-tfjob"
    try:
        started = time.monotonic()
        done = _mlsubmit(kube, home, tmp_path, "train", "--target", target, "--package-path",
                         str(TRAINERS / "vertex_strict" / "trainer"), "--job-name", "bad-job", *more)
    finally:
        kube.forbid, kube.serve_jobsets, kube.serve_tfjobs = False, True, True
        kube.kubeconfig = env_config
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stdout + done.stderr
    assert time.monotonic() - started < 15
    expected = {"context": "nope", "namespace": "namespace 'ghost' does not exist",
                "forbidden": "refuses to let you get",
                "unreachable": "cannot reach the Kubernetes API server", "gpu": "NVIDIA_TESLA_K80",
                "no-jobset": "does not serve jobset.x-k8s.io/v1alpha2 JobSets",
                "no-tfjob": "does not serve kubeflow.org/v1 TFJobs (the Kubeflow Training Operator"}[case]
    assert expected in done.stderr
    assert kube.store.objects.keys() == before.keys()


def _tiny_train(kube, home, tmp_path, package, name, *more, trainer_args=()):
    return _mlsubmit(kube, home, tmp_path, "train", "--target", "kubernetes", "--k8s-api", "jobset", "--package-path",
                     str(package), "--module-name", "tinypkg.task", "--job-name", name, *more, "--", *trainer_args)


def _left(kube, name):
    return sorted((kind, n) for kind, _, n in kube.store.objects if n.startswith(name) and kind != "configmaps")


def test_a_failing_jobset_is_recreated_max_restarts_times_then_fails(kube, home, tmp_path, tiny):
    done = _tiny_train(kube, home, tmp_path, tiny, "js-fail", "--workers", "1", "--max-restarts", "1",
                       trainer_args=["--fail"])
    assert done.returncode == 1, done.stdout[-4000:] + done.stderr[-2000:]
    assert lines(done.stdout, "worker-0").count("the worker fails on purpose") == 2  # the first run and one restart
    assert "reaching max number of restarts" in done.stderr and "js-fail-worker-0" in done.stderr
    assert _left(kube, "js-fail") == [] and not job_processes("js-fail")  # a failed job is deleted
    # a plain Indexed Job has no restarts to give: one line, nothing made
    refused = _mlsubmit(kube, home, tmp_path, "train", "--target", "kubernetes", "--package-path",
                        str(tiny), "--module-name", "tinypkg.task", "--job-name", "js-no",
                        "--max-restarts", "2")
    assert refused.returncode == 2 and "--max-restarts" in refused.stderr and "--k8s-api jobset" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and not _left(kube, "js-no")


def test_a_jobset_through_kubectl_apply_then_cancelled_leaves_nothing(kube, home, tmp_path, tiny):
    sdist = _sdist(tiny, tmp_path / "dist")
    made = _mlsubmit(kube, home, tmp_path, "config", "--format", "kubernetes", "--k8s-api", "jobset", "--tier",
                     "CUSTOM", "--workers", "1", "--module-name", "tinypkg.task", "--job-name", "js-cancel",
                     "--package-uris", str(sdist), "--", "--forever")
    assert made.returncode == 0, made.stderr
    (tmp_path / "jobset.yaml").write_text(made.stdout)
    applied = _kubectl(kube, "apply", "-f", str(tmp_path / "jobset.yaml"))
    assert applied.returncode == 0 and "jobset.jobset.x-k8s.io/js-cancel created" in applied.stdout, applied.stderr
    listed = _kubectl(kube, "get", "jobsets")
    assert re.search(r"^js-cancel\s", listed.stdout, re.M), listed.stdout + listed.stderr
    deadline = time.monotonic() + 60
    while len(job_processes("js-cancel")) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
    pods = _kubectl(kube, "get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name=js-cancel", "-o",
                    "jsonpath={.items[*].spec.hostname}")
    assert sorted(pods.stdout.split()) == ["js-cancel-chief-0-0", "js-cancel-worker-0-0"]
    running = _mlsubmit(kube, home, tmp_path, "jobs", "describe", "js-cancel", "--api", "kubernetes", "--output",
                        "json")
    assert json.loads(running.stdout)["state"] == "RUNNING", running.stderr
    cancelled = _mlsubmit(kube, home, tmp_path, "jobs", "cancel", "js-cancel", "--api", "kubernetes")
    assert cancelled.returncode == 0 and "CANCELLED" in cancelled.stdout, cancelled.stdout + cancelled.stderr
    assert _left(kube, "js-cancel") == []
    assert _kubectl(kube, "get", "jobsets,jobs,pods", "-o", "name").stdout.count("js-cancel") == 0
    assert not job_processes("js-cancel")


def test_a_job_past_active_deadline_seconds_fails_and_its_pods_are_killed(kube, home, tmp_path, tiny):
    package = tiny
    started = time.monotonic()
    done = _mlsubmit(kube, home, tmp_path, "train", "--target", "kubernetes", "--package-path", str(package),
                     "--module-name", "tinypkg.task", "--workers", "1", "--job-name", "late-job", "--max-runtime",
                     "6s", "--", "--forever")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr
    assert "Job was active longer than specified deadline" in done.stderr and time.monotonic() - started < 60
    # killed wherever the deadline found it (installing, or sleeping as here once the venv is cached)
    assert not job_processes("late-job") and not _left(kube, "late-job")


def test_pod_failure_policy_fails_the_job_at_once_or_counts_against_the_backoff_limit(kube, home, tmp_path, tiny):
    package = tiny
    # exit code 3 (the launcher's "could not install") matches mlsubmit's FailJob rule: failed at once, one line why
    done = _mlsubmit(kube, home, tmp_path, "train", "--target", "kubernetes", "--package-path", str(package),
                     "--module-name", "tinypkg.exits", "--job-name", "pfp-job", "--", "3")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr
    assert "failed with exit code 3 matching FailJob rule at index 1" in done.stderr
    # any other code counts against backoffLimit: with 1, the index gets one more pod, then BackoffLimitExceeded
    made = _mlsubmit(kube, home, tmp_path, "config", "--format", "kubernetes", "--tier", "BASIC", "--module-name",
                     "tinypkg.exits", "--job-name", "backoff-job", "--package-uris",
                     str(_sdist(package, tmp_path / "dist")), "--", "7")
    assert made.returncode == 0, made.stderr
    (tmp_path / "job.yaml").write_text(made.stdout.replace("backoffLimit: 0", "backoffLimit: 1"))
    assert _kubectl(kube, "apply", "-f", str(tmp_path / "job.yaml")).returncode == 0
    waited = _kubectl(kube, "wait", "--for=condition=Failed", "job/backoff-job-chief", "--timeout=60s", timeout=70)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    reason = _kubectl(kube, "get", "job", "backoff-job-chief", "-o",
                      "jsonpath={.status.conditions[?(@.type=='Failed')].reason}").stdout
    assert reason == "BackoffLimitExceeded"
    pods = _kubectl(kube, "get", "pods", "-l", "job-name=backoff-job-chief", "-o",
                    "jsonpath={.items[*].status.containerStatuses[0].state.terminated.exitCode}")
    assert pods.stdout.split() == ["7", "7"]
    assert _kubectl(kube, "delete", "-f", str(tmp_path / "job.yaml")).returncode == 0


def test_kubectl_strict_validation_refuses_unknown_fields_as_kube_apiserver_does(kube, home, tmp_path):
    made = _mlsubmit(kube, home, tmp_path, "config", "--format", "kubernetes", "--k8s-api", "jobset", "--tier",
                     "CUSTOM", "--workers", "1", "--job-name", "strict-job", "--package-uris", "gs://b/t.tar.gz")
    assert made.returncode == 0, made.stderr
    launcher, jobset = list(yaml.safe_load_all(made.stdout))
    jobset["spec"]["failurePolicy"]["maxRestartz"] = 1
    jobset["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["containers"][0]["colour"] = "red"
    launcher["extra"] = True
    for obj, expected in ((launcher, 'ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding '
                                     'error: unknown field "extra"'),
                          (jobset, 'JobSet in version "v1alpha2" cannot be handled as a JobSet: strict decoding '
                                   'error: unknown field "spec.failurePolicy.maxRestartz", unknown field '
                                   '"spec.replicatedJobs[1].template.spec.template.spec.containers[0].colour"')):
        (tmp_path / "bad.yaml").write_text(yaml.safe_dump(obj))
        refused = _kubectl(kube, "apply", "-f", str(tmp_path / "bad.yaml"))
        assert refused.returncode == 1 and "Error from server (BadRequest)" in refused.stderr, refused.stderr
        assert expected in refused.stderr
    assert not [k for k in kube.store.objects if k[2].startswith("strict-job")]


def test_a_chief_worker_and_parameter_server_as_a_jobset_end_with_the_chief(kube, home, tmp_path, tiny):
    """The parameter-server layout as a JobSet, on the tiny package (the bundled trainer's parameter-server training
    runs on Dask, tests/test_engine_dask.py, and with `train --local`): every replica runs with its place in
    TF_CONFIG, and the chief's success ends the JobSet while the worker and the parameter server still run."""
    package = tiny
    train = ["train", "--target", "kubernetes", "--k8s-api", "jobset", "--package-path", str(package),
             "--module-name", "tinypkg.task", "--workers", "1", "--ps", "1", "--job-name", "ps-job", "--", "--meet"]
    done = _mlsubmit(kube, home, tmp_path, *train)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "role worker 0 rank 1 args ['--meet']" in lines(done.stdout, "worker-0")
    assert any(line.startswith("role ps 0 ") for line in lines(done.stdout, "ps-0")), done.stdout[-3000:]
    assert lines(done.stdout, "chief-0")[-1] == "chief done"
    assert re.search(r"job ps-job SUCCEEDED in [\d.]+ s", done.stdout)
    assert "ConfigMap/ps-job-launcher, JobSet/ps-job" in done.stdout
    # the JobSet controller made one Indexed Job per replicatedJob and the headless Service its subdomain names;
    # once the chief succeeded it removed the worker's and the parameter server's Jobs and pods
    chief_pod = next(n for k, _, n in kube.store.objects if k == "pods" and n.startswith("ps-job-chief-0-0-"))
    assert _left(kube, "ps-job") == [("jobs", "ps-job-chief-0"), ("jobsets", "ps-job"), ("pods", chief_pod),
                                     ("services", "ps-job")]
    assert kube.store.objects[("jobsets", "default", "ps-job")]["status"]["conditions"][0]["type"] == "Completed"
    assert not job_processes("ps-job")
    again = _mlsubmit(kube, home, tmp_path, *train)  # the same submission again: no second JobSet
    assert again.returncode == 0 and "job ps-job found (this submission ran before)" in again.stdout, again.stderr
    described = _mlsubmit(kube, home, tmp_path, "jobs", "describe", "ps-job", "--api", "kubernetes", "--output", "json")
    assert json.loads(described.stdout)["state"] == "SUCCEEDED", described.stderr


def test_a_tfjob_gets_the_operators_tf_config_and_ends_with_its_chief(kube, home, tmp_path, tiny):
    package = tiny
    done = _mlsubmit(kube, home, tmp_path, "train", "--target", "kubernetes", "--k8s-api", "tfjob", "--package-path",
                     str(package), "--module-name", "tinypkg.task", "--workers", "1", "--ps", "1", "--job-name",
                     "tf-job", "--", "--meet")  # the chief ends once the worker and the parameter server have run
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "ConfigMap/tf-job-launcher, TFJob/tf-job" in done.stdout
    # the launcher ran each replica as the TF_CONFIG the emulated operator gave its pod says
    assert "role worker 0 rank 1 args ['--meet']" in lines(done.stdout, "worker-0") and "role ps 0" in done.stdout
    assert lines(done.stdout, "chief-0")[-1] == "chief done" and re.search(r"job tf-job SUCCEEDED", done.stdout)
    tfjob = kube.store.objects[("tfjobs", "default", "tf-job")]
    assert tfjob["status"]["conditions"][-1]["type"] == "Succeeded"
    # cleanPodPolicy Running: the worker's and the parameter server's pods were deleted when the chief ended
    assert [n for k, _, n in kube.store.objects if k == "pods" and n.startswith("tf-job-")] == ["tf-job-chief-0"]
    assert not job_processes("tf-job")
    cancelled = _mlsubmit(kube, home, tmp_path, "jobs", "cancel", "tf-job", "--api", "kubernetes")
    assert cancelled.returncode == 2 and "already ended (SUCCEEDED)" in cancelled.stderr


def test_a_pod_gets_the_images_listed_package_its_trainer_imports_in_another_module(kube, home, tmp_path, tiny):
    """cloudml-hypertune, which the image carried, imported by a module other than the entry point and declared
    nowhere: the launcher spec the pods mount asks for it before the package (as the Vertex AI container's command
    does), and the trainer runs. (This machine's Python, which the emulated pods start from, has it too: the spec is
    what a real cluster's pods would go by.)"""
    done = _mlsubmit(kube, home, tmp_path, "train", "--target", "kubernetes", "--package-path", str(tiny),
                     "--module-name", "tinypkg.tuned", "--job-name", "tuned-job")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert any(line.startswith("reports with hypertune") for line in lines(done.stdout, "chief-0")), \
        done.stdout[-3000:]
    mounted = _kubectl(kube, "get", "configmap", "tuned-job-launcher", "-o", r"jsonpath={.data.chief\.json}")
    assert json.loads(mounted.stdout)["requirements"] == ["tensorboard~=2.21.0", "cloudml-hypertune==0.1.0.dev6"], \
        mounted.stdout + mounted.stderr
    assert not job_processes("tuned-job")
