"""What every engine test module checks on its own real cluster (tests/test_engine_{dask,ray,spark}.py): the same
`mlsubmit train --target …` a user runs, in a subprocess, then the job's record through `mlsubmit jobs`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRAINERS = ROOT / "tests" / "fixtures" / "trainers"

# A tiny package (no TensorFlow): the chief listens on its address for a while (3 s; with --at-once none), the others
# run until stopped. With --meet the others first connect to the chief's address, and the chief waits for all of
# them before its while: every replica has run before the chief ends, however late the engine starts them.
TASK = '''\
import json, os, socket, sys, time
cfg = json.loads(os.environ["TF_CONFIG"])
task = cfg["task"]
print("role", task["type"], task["index"], "rank", os.environ.get("RANK"), "args", sys.argv[1:], flush=True)
print("cwd", os.getcwd(), flush=True)
if "--fail" in sys.argv and task["type"] == "worker":
    print("the worker fails on purpose", flush=True)
    sys.exit(7)
chief = cfg["cluster"].get("chief", [""])[0].rsplit(":", 1)
if task["type"] == "chief":
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((chief[0], int(chief[1])))
    server.listen()
    peers = [server.accept()[0] for role, tasks in cfg["cluster"].items() if role != "chief" for _ in tasks] \\
        if "--meet" in sys.argv else []
    time.sleep(3600 if "--forever" in sys.argv else 0 if "--at-once" in sys.argv else 3)
    print("chief done", flush=True)
else:
    while "--meet" in sys.argv:
        try:
            met = socket.create_connection((chief[0], int(chief[1])), timeout=5)
            break
        except OSError:
            time.sleep(0.2)
    while True:  # a parameter server: runs until the service stops it
        time.sleep(0.2)
'''


def tiny_project(root: Path) -> Path:
    """tests.support.tiny_package's project with TASK as its task and no requirements; returns the package dir."""
    from tests.support.tiny_package import make_project

    package = make_project(root, task=TASK)
    (root / "setup.py").write_text((root / "setup.py").read_text().replace('["requests>=2", "numpy"]', "[]"))
    return package


def mlsubmit(*args: str, cluster, home: Path, cwd: Path, timeout: float = 400,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_COLOR": "1", "MLSUBMIT_HOME": str(home), **cluster.env, **(env or {})}
    return subprocess.run([sys.executable, "-m", "mlsubmit", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def train(cluster, *args: str, home: Path, cwd: Path, timeout: float = 400,
          env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return mlsubmit("train", "--target", cluster.target, *args, cluster=cluster, home=home, cwd=cwd,
                    timeout=timeout, env=env)


# A package for stock nodes (no TensorFlow there): it imports mlsubmit_runtime, so the runtime's sdist travels with
# it (the package a stock node's setuptools could not build, #32), and needs tabulate, which pip fetches from the
# node's index; each replica says which Python its venv was made from and what that Python brought.
STOCK_TASK = '''\
import importlib.metadata, importlib.util, json, os, sys
import mlsubmit_runtime
from tabulate import tabulate
try:
    setuptools = importlib.metadata.version("setuptools")
except importlib.metadata.PackageNotFoundError:
    setuptools = None
facts = {"python": "%d.%d" % sys.version_info[:2], "base": sys.base_prefix, "setuptools": setuptools,
         "wheel": importlib.util.find_spec("wheel") is not None}
print("node", json.dumps(facts), flush=True)
print(tabulate([[json.loads(os.environ["TF_CONFIG"])["task"]["type"], mlsubmit_runtime.__name__]]), flush=True)
'''


def stock_project(root: Path) -> Path:
    """A tiny project whose task is STOCK_TASK and whose one requirement is tabulate; returns the package dir."""
    from tests.support.tiny_package import make_project

    package = make_project(root, task=STOCK_TASK)
    (root / "setup.py").write_text((root / "setup.py").read_text().replace('["requests>=2", "numpy"]',
                                                                          '["tabulate"]'))
    return package


def node_facts(output: str, replica: str) -> dict:
    said = [line for line in lines(output, replica) if line.startswith("node {")]
    assert said, output[-3000:]
    return json.loads(said[-1][len("node "):])


def check_stock_nodes(cluster, tmp: Path, home: Path, stock, env: dict[str, str]) -> None:
    """Chief + worker on nodes whose replicas run a stock Python (`env` makes them: PYSPARK_PYTHON, or
    MLSUBMIT_NODE_PYTHON): the runtime's sdist and the trainer's are built as the cloud's `pip install` builds
    them (in isolation, setuptools fetched from the index), whatever setuptools/wheel that Python has."""
    package = stock_project(tmp / "stock")
    done = train(cluster, "--package-path", str(package), "--module-name", "tinypkg.task", "--workers", "1",
                 "--job-name", "stock_job", home=home, cwd=tmp, env=env)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "exit codes: chief-0 0, worker-0 0" in done.stdout
    for replica in ("chief-0", "worker-0"):
        assert node_facts(done.stdout, replica) == stock.facts(), done.stdout[-3000:]
        assert f"{replica} starts python -m tinypkg.task" in "\n".join(lines(done.stdout, replica))
    assert "packages installed with their requirements into" in done.stdout
    assert "--no-build-isolation" not in done.stdout  # the node reached its index: nothing built without isolation


def lines(output: str, replica: str) -> list[str]:
    return [line.split("] ", 1)[1].strip() for line in output.splitlines() if line.startswith(f"[{replica}]")]


def job_processes(job_id: str) -> list[int]:
    """Processes anywhere on this machine whose environment says they belong to `job_id` (CLOUD_ML_JOB_ID)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if f"CLOUD_ML_JOB_ID={job_id}\0".encode() in (proc / "environ").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def check_synchronous_chief_and_worker(cluster, tmp: Path, home: Path, evaluator: bool = False) -> None:
    """The bundled trainer as chief + worker (+ evaluator): chief and worker end with bit-identical weights, the
    evaluator follows their checkpoints and ends on its own; `jobs` sees the record."""
    more = ("--evaluators", "1") if evaluator else ()
    done = train(cluster, "--package-path", str(ROOT / "trainer"), "--workers", "1", *more, "--job-name", "sync_job",
                 "--job-dir", "job", "--", "--data", "synthetic:8x8x1:4:256", "--epochs", "1", "--batch-size", "16",
                 "--steps-per-epoch", "3", home=home, cwd=tmp)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    digests = {r: re.search(r"weights sha256 (\w+)", "\n".join(lines(done.stdout, r))).group(1)
               for r in ("chief-0", "worker-0")}
    assert digests["chief-0"] == digests["worker-0"]
    assert re.search(r"job sync_job SUCCEEDED in [\d.]+ s on \w+://127.0.0.1:\d+ — exit codes: chief-0 0, "
                     r"worker-0 0" + (", evaluator-0 0" if evaluator else ""), done.stdout)
    if evaluator:
        assert "evaluator-0: training has ended; evaluated 1 checkpoint(s)" in lines(done.stdout, "evaluator-0")
    metrics = json.loads((tmp / "job" / "metrics.json").read_text())
    assert (metrics["strategy"], metrics["weights_sha256"]) == ("multi_worker_mirrored", digests["chief-0"])
    described = mlsubmit("jobs", "describe", "sync_job", "--api", "cluster", "--output", "json", cluster=cluster,
                         home=home, cwd=tmp)
    assert described.returncode == 0, described.stderr
    assert json.loads(described.stdout)["state"] == "SUCCEEDED"
    logs = mlsubmit("jobs", "logs", "sync_job", "--api", "cluster", "--task", "worker-0", cluster=cluster, home=home,
                    cwd=tmp)
    assert digests["worker-0"] in logs.stdout and digests["chief-0"] in logs.stdout


def check_parameter_servers(cluster, tmp: Path, home: Path, gcs) -> None:
    """The bundled trainer as chief + worker + parameter server, its job dir a gs:// one: the replicas on the cluster
    write the artifacts to the bucket (the job's own --env points them at the emulator, as a user points a cluster
    at a bucket), MANIFEST.json last; nothing lands here."""
    emulator, bucket = gcs
    done = train(cluster, "--package-path", str(ROOT / "trainer"), "--workers", "1", "--ps", "1", "--job-name",
                 "ps_job", "--job-dir", f"gs://{bucket}/run", *(f"--env={k}={v}" for k, v in emulator.env().items()),
                 "--", "--data", "synthetic:8x8x1:4:256", "--epochs", "1", "--batch-size", "16", "--steps-per-epoch",
                 "3", home=home, cwd=tmp)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "exit codes: chief-0 0, worker-0 0, ps-0 0" in done.stdout
    metrics = json.loads(_gcs_artifacts(emulator, bucket, "run", {"model/model.keras", "metrics.json"})
                         ["metrics.json"])
    assert (metrics["strategy"], metrics["cluster"]) == ("parameter_server", {"chief": 1, "worker": 1, "ps": 1})
    assert not (tmp / "gs:").exists() and not (tmp / "jobs").exists()


def _gcs_artifacts(emulator, bucket: str, base: str, expected: set[str]) -> dict[str, bytes]:
    """The files MANIFEST.json (the trainer's job dir: AIP_MODEL_DIR's parent) lists under gs://bucket/base, each
    read back at the size it lists; `expected` among them."""
    import urllib.request

    def read(name: str) -> bytes:
        with urllib.request.urlopen(f"{emulator.endpoint}/storage/v1/b/{bucket}/o/" + name.replace("/", "%2F") +
                                    "?alt=media", timeout=10) as answer:
            return answer.read()

    manifest = json.loads(read(f"{base}/MANIFEST.json"))
    listed = {entry["path"]: entry["size"] for entry in manifest["files"]}
    assert expected <= set(listed), manifest
    found = {path: read(f"{base}/{path}") for path in listed}
    assert {path: len(data) for path, data in found.items()} == listed
    return found


def check_user_trainer(cluster, tmp: Path, home: Path) -> None:
    """A user's package as written (legacy habits: --job-dir, a requirement mlsubmit's environment lacks)."""
    done = train(cluster, "--api", "legacy", "--package-path", str(TRAINERS / "not_named_trainer" / "linear_model"),
                 "--module-name", "linear_model.task", "--job-name", "user_job", "--job-dir", "userjob", "--",
                 "--num-steps", "3", home=home, cwd=tmp)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "step 3/3 loss" in done.stdout and "-----  ------  -----" in done.stdout  # tabulate was installed
    assert json.loads((tmp / "userjob" / "weights.json").read_text())["loss"] < 2.0


def check_failing_replica(cluster, tmp: Path, home: Path, package: Path) -> None:
    done = train(cluster, "--package-path", str(package), "--module-name", "tinypkg.task", "--workers", "1",
                 "--job-name", "failing_job", "--", "--fail", "--forever", home=home, cwd=tmp)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr
    assert "job failing_job failed: worker-0 exited with code 7; the other replicas were stopped" in done.stderr
    assert "the worker fails on purpose" in done.stderr.split("worker-0's last output")[1]  # its last lines
    deadline = time.monotonic() + 20
    while job_processes("failing_job") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not job_processes("failing_job")


def check_cancel(cluster, tmp: Path, home: Path, package: Path) -> None:
    """`mlsubmit jobs cancel` from another shell stops every replica on the cluster; no process is left."""
    env = {**os.environ, "NO_COLOR": "1", "MLSUBMIT_HOME": str(home), **cluster.env}
    job = subprocess.Popen([sys.executable, "-m", "mlsubmit", "train", "--target", cluster.target, "--package-path",
                            str(package), "--module-name", "tinypkg.task", "--ps", "1", "--workers", "1",
                            "--job-name", "cancel_job", "--", "--forever"], cwd=tmp, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = threading.Event()
    out: list[str] = []
    started: set[str] = set()

    def read() -> None:
        for line in job.stdout:
            out.append(line)
            for tag, role in (("[chief-0]", "role chief 0"), ("[worker-0]", "role worker 0"), ("[ps-0]", "role ps 0")):
                if line.startswith(tag) and role in line:
                    started.add(tag)
            if len(started) == 3:  # every replica runs (the engine may start them in any order)
                seen.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert seen.wait(240), "".join(out)
        assert len(job_processes("cancel_job")) >= 3
        folders = set()  # each replica's private working folder on its node: its module runs in it
        for pid in job_processes("cancel_job"):
            try:
                folders.add(Path(os.readlink(f"/proc/{pid}/cwd")))
            except OSError:
                continue
        folders = {f for f in folders if f.name.startswith("cancel_job-")}
        assert len(folders) == 3, folders
        cancelled = mlsubmit("jobs", "cancel", "cancel_job", "--api", "cluster", cluster=cluster, home=home, cwd=tmp)
        assert cancelled.returncode == 0 and "now CANCELLED" in cancelled.stdout, cancelled.stdout + cancelled.stderr
        assert job.wait(60) == 130
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    deadline = time.monotonic() + 20
    while job_processes("cancel_job") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not job_processes("cancel_job"), "".join(out)
    assert [f for f in folders if f.exists()] == [], "".join(out)  # each launcher removed its folder as it ended


STUDY = """\
trainingInput:
  hyperparameters:
    goal: MINIMIZE
    hyperparameterMetricTag: mse
    maxTrials: 2
    algorithm: GRID_SEARCH
    params:
      - parameterName: learning_rate
        type: DISCRETE
        discreteValues: [0.01, 0.1]
"""


def check_tuning(cluster, tmp: Path, home: Path) -> None:
    """A study's trials, each a job on the cluster: the trial in TF_CONFIG, its metric through cloudml-hypertune."""
    from tests.support.hypertune_package import expected_mse, make_hp_project

    package = make_hp_project(tmp / "hp")
    (tmp / "study.yaml").write_text(STUDY)
    done = train(cluster, "--api", "legacy", "--hptune-config", "study.yaml", "--package-path", str(package),
                 "--module-name", "hptrainer.task", "--job-name", "study_job", "--job-dir", "study", home=home, cwd=tmp)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "study study_job SUCCEEDED" in done.stderr
    for trial, rate in (("1", 0.01), ("2", 0.1)):
        seen = json.loads((tmp / "study" / trial / "trial.json").read_text())
        assert seen["task"]["trial"] == trial and seen["trial"] == trial, seen
        assert f"trial {trial} SUCCEEDED: mse {expected_mse(rate):g}" in done.stdout


def check_max_runtime(cluster, tmp: Path, home: Path, package: Path) -> None:
    """--max-runtime: the job fails once it has run that long, and every replica is stopped."""
    done = train(cluster, "--package-path", str(package), "--module-name", "tinypkg.task", "--workers", "1",
                 "--max-runtime", "12s", "--job-name", "slow_job", "--", "--forever", home=home, cwd=tmp)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr
    assert "job slow_job failed: the job ran past its --max-runtime of 12 s and every replica was stopped" \
        in done.stderr
    assert "role chief 0" in done.stdout and "role worker 0" in done.stdout  # both ran until they were stopped
    deadline = time.monotonic() + 20
    while job_processes("slow_job") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not job_processes("slow_job")
