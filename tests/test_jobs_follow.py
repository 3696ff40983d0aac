"""Following jobs as they run: every replica's lines once and in order across pages of entries.list; a live status
line on a terminal that never swallows piped stdout; Ctrl-C (SIGINT to the CLI process) detaches promptly while
the job keeps running, and `jobs logs --follow` reattaches."""

from __future__ import annotations

import os
import pty
import re
import signal
import subprocess
import threading
import time

pytest_plugins = ["support.training_emulator", "support.submit_cli"]
TASK = ("--python-module", "tinypkg.task", "--skip-preflight", "--machine-type", "n1-standard-4")


def test_streamed_logs_show_every_replica_line_once_and_in_order(cloud, task_project):
    run = cloud.run("train", "--workers", "1", "--package-path", task_project, *TASK, "--", "--lines", "1200")
    assert run.code == 0, run.stderr[-2000:]
    for task, me in (("workerpool0-0", "chief-0"), ("workerpool1-0", "worker-0")):
        numbers = [int(m) for m in re.findall(rf"^{task} \| line (\d+) of {me}$", run.stdout, re.M)]
        assert numbers == list(range(1200)), (task, len(numbers))
    assert run.stdout.count("Job completed successfully.") == 1
    assert re.search(r"job \d+ SUCCEEDED", run.stderr)


def test_ctrl_c_detaches_promptly_and_the_job_runs_on_to_success(cloud, task_project):
    streaming = cloud.start("train", "--stream-logs", "--job-name", "keeps-running", "--package-path", task_project,
                            *TASK, "--", "--lines", "3", "--sleep", "4")
    streaming.wait_for("line 2 of chief-0")
    interrupted = time.monotonic()
    streaming.process.send_signal(signal.SIGINT)
    run = streaming.finish(timeout=30)
    assert time.monotonic() - interrupted < 3, "the CLI did not exit promptly"
    assert run.code == 130, run.stderr
    job_id = re.search(r"detached from job (\d+); it keeps running", run.stderr).group(1)
    assert f"mlsubmit jobs logs {job_id} --follow" in run.stderr and f"mlsubmit jobs cancel {job_id}" in run.stderr
    assert "Traceback" not in run.stderr

    (job,) = cloud.vertex_jobs()
    assert job["state"] == "JOB_STATE_RUNNING" and job["name"].endswith(job_id)
    again = cloud.run("jobs", "logs", job_id, "--follow")
    assert again.code == 0, again.stderr
    assert [line for line in again.stdout.splitlines() if "line " in line] == \
        [f"workerpool0-0 | line {i} of chief-0" for i in range(3)]
    assert f"job {job_id} SUCCEEDED" in again.stderr
    assert cloud.vertex_jobs()[0]["state"] == "JOB_STATE_SUCCEEDED"


def test_a_terminal_gets_a_live_status_line_while_piped_stdout_gets_every_log_line(cloud, task_project):
    controller, terminal = pty.openpty()
    shown: list[bytes] = []

    def read_terminal() -> None:
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:
                return
            if not chunk:
                return
            shown.append(chunk)

    reader = threading.Thread(target=read_terminal, daemon=True)
    reader.start()
    run = subprocess.run(cloud.command("train", "--job-name", "on-a-terminal", "--package-path", task_project, *TASK,
                                       "--", "--lines", "2", "--sleep", "2"),
                         stdout=subprocess.PIPE, stderr=terminal, text=True, env=cloud.env, timeout=120)
    os.close(terminal)
    reader.join(timeout=5)
    os.close(controller)
    screen = b"".join(shown).decode(errors="replace")
    assert run.returncode == 0, screen[-2000:]
    live = r"job \d+ \x1b\[1mRUNNING\x1b\[0m · \d+s · no new logs · Ctrl-C detaches"
    assert re.search(live, screen), screen[-2000:]
    assert [line for line in run.stdout.splitlines() if " line " in line] == \
        [f"workerpool0-0 | line {i} of chief-0" for i in range(2)]
    assert "Job completed successfully." in run.stdout and "SUCCEEDED" in screen
