"""The bundled trainer's bad input, and what replicas print, in the hostile-input corpus (issue #25).

- A trainer's bad input is ONE line on stderr with nothing before it, exit 2, nothing on stdout: even when the
  check needs TensorFlow (how many GPUs there are), whose C++ start-up lines come first unless they are caught,
  and whatever TF_CPP_MIN_LOG_LEVEL says (those lines ignore it).
- Replica output loses exactly the known chatter: a user's own lines that quote it, or look like it, stay; a
  replica that floods its output with what looks like chatter is filtered in bounded time.

Each case is bounded in time in the test (subprocess timeouts, a wall-clock budget for the filters).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mlsubmit.local.runner import Replica, Runner
from mlsubmit_runtime.chatter import drop_chatter, is_chatter
from tests.support.trainer_run import ROOT

# A trainer's bad input that needs TensorFlow to be found out (how many GPUs it sees), and some that do not (the
# trainer refuses them before TensorFlow is imported).
# TF_CPP_MIN_LOG_LEVEL: 0 (every line), 2 (what the trainer sets when it is unset; the start-up lines ignore it).
GPUS = "error: invalid value for --gpus: received 3, but this machine has 0 GPUs; use --gpus auto, --gpus 0 (the " \
       "CPU), or --emulate-devices 3 to rehearse the multi-device path on the CPU"
BAD_INPUT = [
    (("--gpus", "3"), GPUS, "0"),
    (("--gpus", "3"), GPUS, "2"),
    (("--gpus", "3", "--data", "mnist.npz"), "error: invalid value for --data: 'mnist.npz' does not exist", None),
    (("--epochs", "0"), "error: invalid value for --epochs: received '0'; expected a whole number ≥ 1", None),
    (("--input-workers", "999"), "error: invalid value for --input-workers: received '999'; expected auto or a "
                                 "whole number from 1 to ", None),
    (("--augment", "on", "--data", "synthetic:20"),
     "error: invalid value for --augment: received 'on' for data of shape (20,), but the flip and padded crop need "
     "HxWxC images", None),
]


# `python -m trainer.task ARGS` as users run it, noting in a file (argv[1]) whether TensorFlow was imported.
AS_USERS_RUN_IT = """
import atexit, runpy, sys
marker = sys.argv.pop(1)
atexit.register(lambda: open(marker, "w").write(str("tensorflow" in sys.modules)))
sys.argv[0] = "trainer.task"
runpy.run_module("trainer.task", run_name="__main__", alter_sys=True)
"""


def _gpus() -> int:
    """The NVIDIA GPUs the driver lists (what TensorFlow could see at most), without importing TensorFlow here."""
    listed = Path("/proc/driver/nvidia/gpus")
    return len(list(listed.iterdir())) if listed.is_dir() else 0


@pytest.mark.parametrize(("args", "expected", "level"), BAD_INPUT)
def test_the_trainers_bad_input_is_one_line_with_nothing_before_it(tmp_path, args, expected, level):
    if args[:2] == ("--gpus", "3") and _gpus() >= 3:
        pytest.skip("this machine has 3 GPUs")
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "MLSUBMIT_EMULATE_DEVICES")}
    if level is not None:
        env["TF_CPP_MIN_LOG_LEVEL"] = level
    started = time.monotonic()
    imported = tmp_path / "tensorflow-imported"  # written at exit: was TensorFlow imported before the refusal?
    done = subprocess.run([sys.executable, "-c", AS_USERS_RUN_IT, str(imported), "--job-dir", str(tmp_path / "job"),
                           *args], cwd=tmp_path if "mnist.npz" in args else ROOT,
                          env={**env, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(expected), done.stderr
    assert not (tmp_path / "job" / "MANIFEST.json").exists()
    assert imported.read_text() == str(level is not None)  # only the GPU count needs TensorFlow
    assert time.monotonic() - started < 120


def test_replica_lines_that_only_look_like_chatter_reach_the_user(tmp_path):
    """A user's trainer printing near misses of the known lines (quoted, prefixed, extended, a task name outside
    a stragglers list) gets every one of them through, in order, in the output and in the job's log."""
    own = [
        "Started server with target: grpc://127.0.0.1:2222",
        "my note: WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
        "I0000 00:00:1795571368.090971   18833 grpc_server_lib.cc:467] Started server with target: grpc://a b",
        "/job:worker/replica:0/task:0",
        "Example stragglers:",
        "E0000 00:00:1795571390.010110   19164 coordination_service.cc:1472] Barrier(WaitForAllTasks::1::0) has "
        "passed with status: DEADLINE_EXCEEDED",
    ]
    chatter = "I0000 00:00:1795571369.048523   19165 coordination_service.cc:505] Example stragglers:"
    script = "import sys\n" + "".join(f"print({line!r}, file=sys.stderr)\n" for line in [chatter, *own])
    replica = Replica("chief-0", "chief", (sys.executable, "-c", script), dict(os.environ), str(tmp_path))
    seen: list[str] = []
    logged: list[str] = []
    started = time.monotonic()
    outcome = Runner([replica], sink=seen.append, on_line=lambda name, line: logged.append(line)).run()
    assert outcome.state == "SUCCEEDED"
    assert logged == own and seen == [f"[chief-0] {line}" for line in own]
    assert time.monotonic() - started < 60


def test_a_flood_of_chatter_and_huge_lines_is_filtered_in_bounded_time():
    """Half a million lines of stragglers and start-up chatter, and 1 MB lines built to make a regular expression
    backtrack, are filtered in seconds; the real lines among them stay."""
    stragglers = "I0000 00:00:1795571369.048523   19165 coordination_service.cc:505] Example stragglers:\n"
    flood = [stragglers] + ["/job:worker/replica:0/task:%d\n" % i for i in range(250_000)]
    flood += ["I0000 00:00:1795571368.090971   18833 grpc_server_lib.cc:467] Started server with target: "
              "grpc://127.0.0.1:1\n"] * 250_000
    near_miss = "I0000 00:00:1795571368.090971   18833 " + "a/" * 500_000 + ":1] oneDNN"  # no "] " where it must be
    huge = "I0000 00:00:1795571368.090971   18833 port.cc:153] oneDNN custom operations are on. " + "x" * 1_000_000
    real = ["Epoch 1/2\n", near_miss + "\n", "error: a real line\n"]
    started = time.monotonic()
    kept = list(drop_chatter([real[0], *flood, real[1], huge + "\n", real[2]]))
    elapsed = time.monotonic() - started
    assert kept == real
    assert is_chatter(huge) and not is_chatter(near_miss)
    assert elapsed < 20, elapsed
