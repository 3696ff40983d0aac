"""The local runner and `mlsubmit train --local` with real processes but no TensorFlow (fast): output, failure,
Ctrl-C, bad input — and never a process left behind."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from support.tiny_package import make_project

from mlsubmit.local.children import popen_kwargs
from mlsubmit.local.runner import FAILED, SUCCEEDED, Replica, Runner

ROOT = Path(__file__).resolve().parent.parent

SLEEPY_TASK = '''\
import argparse, json, os, sys, time

def main():
    parser = argparse.ArgumentParser(prog="tinypkg.task")  # strict: any injected argument would kill it
    parser.add_argument("--output_dir", default=os.environ.get("AIP_MODEL_DIR"))
    args = parser.parse_args()
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    print("role", task["type"], task["index"], "argv", sys.argv[1:], "output", args.output_dir, flush=True)
    print("env", os.environ.get("GREETING"), flush=True)
    print("sees", " ".join(sorted(k for k in os.environ if k in ("CLUSTER_SPEC", "AIP_MODEL_DIR"))), flush=True)
    time.sleep(600)

if __name__ == "__main__":
    main()
'''


def job_processes(job_id: str) -> list[int]:
    """Processes alive with CLOUD_ML_JOB_ID=job_id in their environment (what the runner started)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                environ = (entry / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if f"CLOUD_ML_JOB_ID={job_id}".encode() in environ:
                found.append(int(entry.name))
    return found


def _replica(name: str, role: str, code: str) -> Replica:
    return Replica(name, role, (sys.executable, "-c", code), dict(os.environ), str(ROOT))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_the_chief_ends_the_job_and_replicas_still_running_after_the_grace_are_stopped():
    lines = []
    runner = Runner([_replica("chief-0", "chief", "import time; print('step 1'); time.sleep(0.3); print('done')"),
                     _replica("ps-0", "ps", "import time; print('serving', flush=True); time.sleep(600)")],
                    sink=lines.append, grace_seconds=0.5)
    outcome = runner.run()
    assert outcome.state == SUCCEEDED and outcome.exit_code == 0
    assert outcome.exit_codes == {"chief-0": 0, "ps-0": None}  # None: stopped by the runner
    assert {"[chief-0] step 1", "[chief-0] done", "[ps-0]    serving"} <= set(lines)
    assert not any(_alive(pid) for pid in runner.pids().values())


def test_the_first_failure_ends_the_job_within_seconds_with_its_traceback():
    runner = Runner([_replica("chief-0", "chief", "import time; time.sleep(600)"),
                     _replica("worker-0", "worker", "import time; time.sleep(0.5); raise ValueError('boom')")],
                    sink=lambda line: None, color=True)
    started = time.monotonic()
    outcome = runner.run()
    assert time.monotonic() - started < 10
    assert (outcome.state, outcome.failed, outcome.reason) == (FAILED, "worker-0", "worker-0 exited with code 1")
    assert outcome.traceback.startswith("Traceback") and outcome.traceback.endswith("ValueError: boom")
    assert outcome.exit_codes == {"chief-0": None, "worker-0": 1}
    assert not any(_alive(pid) for pid in runner.pids().values())


def _mlsubmit(*args: str, cwd: Path, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.Popen([sys.executable, "-m", "mlsubmit", *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            **{**popen_kwargs(default_sigint=True), **kwargs})  # it is sent Ctrl-C


def test_ctrl_c_stops_every_replica_of_a_local_job(tmp_path):
    package = make_project(tmp_path / "proj", task=SLEEPY_TASK)
    (package / ".netrc").write_text("machine example.com login me password s3cret\n")  # never packaged
    job = _mlsubmit("train", "--local", "--workers", "1", "--ps", "1", "--package-path", str(package),
                    "--python-module", "tinypkg.task", "--job-dir", "out", "--env", "GREETING=hi", cwd=tmp_path)
    seen = []
    for line in job.stdout:
        seen.append(line.rstrip())
        if sum(line.startswith("[") and " sees " in line for line in seen) == 3:
            break
    output = "\n".join(seen)
    assert "warning: left out tinypkg/.netrc: " in output  # named here too, as `package` names it
    job_id = re.search(r"^job (tinypkg_\d{8}_\d{6}_[0-9a-f]{6}): chief-0", output, re.M).group(1)  # the package's name
    # Vertex AI names the chief `chief`, passes exactly the user's arguments (none) and the job dir as AIP_MODEL_DIR
    assert f"[chief-0]  role chief 0 argv [] output {tmp_path / 'out'}/model/" in output
    assert "[chief-0]  env hi" in output and "[ps-0]     env hi" in output  # --env reaches every replica
    assert "[worker-0] role worker 0" in output and "[ps-0]     role ps 0" in output
    assert "[chief-0]  sees AIP_MODEL_DIR CLUSTER_SPEC" in output
    assert len(job_processes(job_id)) == 3
    job.send_signal(signal.SIGINT)
    rest, _ = job.communicate(timeout=30)
    assert job.returncode == 130
    assert f"error: job {job_id} stopped by the user; every replica was stopped" in rest
    assert job_processes(job_id) == []


def test_bad_input_is_one_line_exit_2_and_starts_nothing(tmp_path):
    def run(*args):
        done = subprocess.run([sys.executable, "-m", "mlsubmit", "train", "--local", *args], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, done.stdout + done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        return done.stderr

    assert "1 parameter server(s) but no workers" in run("--ps", "1", "--job-name", "bad_1")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        assert f"port {port} cannot" in run("--workers", "1", "--start-port", str(port), "--job-name", "bad_2")
    broken = make_project(tmp_path / "broken", task="import no_such_module_anywhere\n")
    said = run("--package-path", str(broken), "--python-module", "tinypkg.task", "--job-name", "bad_3")
    assert "tinypkg.task does not import" in said and "no_such_module_anywhere" in said
    strict = make_project(tmp_path / "strict", task=SLEEPY_TASK.replace(
        'parser.add_argument("--output_dir"',
        'parser.add_argument("--epochs", type=int)\n    parser.add_argument("--output_dir"'))
    said = run("--workers", "1", "--package-path", str(strict), "--python-module", "tinypkg.task", "--job-name",
               "bad_4", "--", "--epochs", "x")  # the trainer's own usage error (exit 2) is the job's
    # both replicas reject it: whichever exits first is named
    assert re.search(r"job bad_4 failed: (chief|worker)-0 rejected its input: ", said)
    assert "invalid int value: 'x'" in said
    assert not any(job_processes(f"bad_{i}") for i in (1, 2, 3, 4))


GCS_TRAINER = '''\
from google.cloud import storage  # google.cloud from the job's venv, google.protobuf from the image's
from google.protobuf import message

print("imported", storage.__name__, "and", message.__name__, flush=True)
'''


def _namespace_job_env(cache: Path) -> Path | None:
    """A Python 3.10 "image" environment carrying protobuf 3.19.6 (whose `-nspkg.pth` makes the `google` namespace at
    start-up, as on the TF 2.8-2.11 images) and a job venv over it, bridged the way mlsubmit.images.envs bridges
    them, with google-cloud-storage 2.14 (PEP 420, no .pth) and a trainer package `gcstrainer`. Built once, kept by
    content hash under the suite's image cache; returns the job venv's python (None: no Python 3.10 here)."""
    import hashlib
    import shutil
    import tempfile

    from mlsubmit.images.interpreters import find_python

    base_python = find_python("3.10")
    if base_python is None:
        return None
    recipe = ["protobuf==3.19.6", "google-cloud-storage==2.14.0", GCS_TRAINER, str(base_python)]
    target = cache / "test-envs" / f"namespace-{hashlib.sha256(chr(0).join(recipe).encode()).hexdigest()[:16]}"
    python = target / "job" / "bin" / "python"
    if python.exists():
        return python
    target.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=".building-", dir=target.parent))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    try:
        for name in ("base", "job"):
            subprocess.run([str(base_python), "-m", "venv", str(building / name)], check=True, timeout=300)
        site = "lib/python3.10/site-packages"
        subprocess.run([str(building / "base/bin/python"), "-m", "pip", "install", "-q", recipe[0]], check=True,
                       timeout=600, env=env)
        (building / "job" / site / "_mlsubmit_image.pth").write_text(
            f"import site; site.addsitedir({str(target / 'base' / site)!r})\n")  # its final place
        (building / "constraints.txt").write_text(recipe[0] + "\n")
        subprocess.run([str(building / "job/bin/python"), "-m", "pip", "install", "-q", "-c",
                        str(building / "constraints.txt"), recipe[1]], check=True, timeout=600,
                       env={**env, "PYTHONPATH": str(building / "base" / site)})
        (building / "job" / site / "gcstrainer").mkdir()
        (building / "job" / site / "gcstrainer" / "__init__.py").write_text("")
        (building / "job" / site / "gcstrainer" / "task.py").write_text(GCS_TRAINER)
        os.rename(building, target)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return python


def test_the_launcher_keeps_google_namespace_packages_importable_on_python_3_10(images_home, tmp_path,
                                                                                 monkeypatch):
    """#21: on an image Python below 3.11 the replicas start through runpy with the working directory off
    sys.path; `from google.cloud import storage` must work there as it does under `python -m`, and a `gcstrainer`
    directory in the user's working directory must still not shadow the installed package."""
    from mlsubmit.jobspec.spec import JobSpec
    from mlsubmit.launcher import replica as launcher
    from mlsubmit.local import local_job
    from mlsubmit.local.local_run import local_workdirs, replicas_to_start

    python = _namespace_job_env(images_home)
    if python is None:
        import pytest

        pytest.skip("no Python 3.10 on this machine")
    user = tmp_path / "user"
    (user / "gcstrainer").mkdir(parents=True)
    (user / "gcstrainer" / "__init__.py").write_text("")
    (user / "gcstrainer" / "task.py").write_text("raise SystemExit('the working tree shadowed the package')\n")
    monkeypatch.chdir(user)
    spec = JobSpec().replace(python_module="gcstrainer.task")
    job = local_job.plan(spec, api="vertex", job_id="ns", job_dir=None, ports=local_job.reserve_ports(1),
                         gpus_here=0)
    replicas = replicas_to_start(job, python, {"PYTHONWARNINGS": "ignore"}, local_workdirs(job, tmp_path / "root"))
    assert launcher.module_command(str(python), "m")[1] == "-c"  # Python 3.10: through runpy, not `-m`
    lines = []
    outcome = Runner(replicas, sink=lines.append).run()
    assert outcome.state == SUCCEEDED, "\n".join(lines)
    assert lines[-1] == "[chief-0] imported google.cloud.storage and google.protobuf.message"


def test_a_failing_replicas_traceback_is_shown_once_with_the_command_for_its_whole_log(tmp_path):
    """#21/#25: streamed once with the replica's name; the error names its exception and the whole log's file."""
    task = ("import json, os, sys\n"
            "role = json.loads(os.environ['TF_CONFIG'])['task']['type']\n"
            "print('line', 1, flush=True)\n"
            "if role == 'worker':\n"
            "    raise ValueError('boom in the worker')\n"
            "import time; time.sleep(600)\n")
    package = make_project(tmp_path / "proj", task=task)
    done = subprocess.run([sys.executable, "-m", "mlsubmit", "train", "--local", "--workers", "1", "--package-path",
                           str(package), "--python-module", "tinypkg.task", "--job-name", "fails_once"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120, env={**os.environ, "NO_COLOR": "1"})
    assert done.returncode == 1, done.stdout + done.stderr
    assert (done.stdout + done.stderr).count("Traceback (most recent call last):") == 1
    assert "[worker-0] Traceback (most recent call last):" in done.stdout
    log = Path(os.environ["MLSUBMIT_HOME"]) / "replicas" / "fails_once" / "worker-0.log"
    assert done.stderr.strip().splitlines()[-1] == (
        "error: job fails_once failed: worker-0 exited with code 1 (ValueError: boom in the worker); the other "
        f"replicas were stopped; its traceback is above; the whole log: less {log}; "
        + done.stderr.strip().split(f"less {log}; ", 1)[1])
    whole = log.read_text()
    assert whole.startswith("line 1\nTraceback (most recent call last):") and "ValueError: boom in the worker" in whole
