"""TensorFlow's C++ start-up chatter is dropped exactly: the known lines go, every real line stays.

The lines below were printed by `import tensorflow` (2.21, CPU-only machine) and by earlier TensorFlow 2.x.
"""

from __future__ import annotations

import os
import sys

import pytest

from mlsubmit.chatter import drop_chatter, is_chatter, quiet_native_startup, without_chatter
from mlsubmit.local.runner import Replica, Runner

CHATTER = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR",
    "I0000 00:00:1795528115.654430   11197 port.cc:153] oneDNN custom operations are on. You may see slightly "
    "different numerical results due to floating-point round-off errors from different computation orders. To turn "
    "them off, set the environment variable `TF_ENABLE_ONEDNN_OPTS=0`.",
    "I0000 00:00:1795528115.654757   11197 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will "
    "not be used.",
    "I0000 00:00:1795528115.700030   11197 cpu_feature_guard.cc:227] This TensorFlow binary is optimized to use "
    "available CPU instructions in performance-critical operations.",
    "To enable the following instructions: AVX2 AVX512F AVX512_VNNI AVX512_BF16 FMA, in other operations, rebuild "
    "TensorFlow with the appropriate compiler flags.",
    "E0000 00:00:1795528118.697118   11197 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: Failed "
    "call to cuInit: UNKNOWN ERROR (303)",
    "E0000 00:00:1723466350.245521   52311 cuda_dnn.cc:8310] Unable to register cuDNN factory: Attempting to register "
    "factory for plugin cuDNN when one has already been registered",
    "E0000 00:00:1723466350.245574   52311 cuda_blas.cc:1418] Unable to register cuBLAS factory: Attempting to "
    "register factory for plugin cuBLAS when one has already been registered",
    "E0000 00:00:1745000000.000000   52311 computation_placer.cc:177] computation placer already registered. Please "
    "check linkage and avoid linking the same target more than once.",
    "W0000 00:00:1723466351.002194   52311 py_utils.cc:38] TF-TRT Warning: Could not find TensorRT",
    "2024-01-02 03:04:05.678901: I tensorflow/core/util/port.cc:113] oneDNN custom operations are on. You may see "
    "slightly different numerical results due to floating-point round-off errors from different computation orders.",
    "2024-01-02 03:04:05.912345: E external/local_xla/xla/stream_executor/cuda/cuda_driver.cc:282] failed call to "
    "cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is detected",
]
# Printed by a real chief + worker `mlsubmit train --local --workers 1 -- --dry-run` of the bundled trainer
# (TensorFlow 2.21, TF_CPP_MIN_LOG_LEVEL=0 as a user trainer that leaves it unset prints them), after the start-up
# lines above: the gRPC servers and the coordination service connecting.
CLUSTER_CHATTER = [
    "I0000 00:00:1795571368.090971   18833 grpc_server_lib.cc:467] Started server with target: grpc://127.0.0.1:36173",
    "I0000 00:00:1795571368.974656   18831 coordination_service.cc:221] Initializing CoordinationService",
    "I0000 00:00:1795571369.048415   19165 coordination_service.h:529] /job:worker/replica:0/task:0 has connected to "
    "coordination service. Incarnation: 18339773620583187770",
    "I0000 00:00:1795571369.048512   19165 coordination_service.cc:502] Waiting for 1/2 tasks to connect.",
    "I0000 00:00:1795571369.048523   19165 coordination_service.cc:505] Example stragglers:",
    "I0000 00:00:1795571369.049035   18833 coordination_service_agent.cc:245] Coordination agent has successfully "
    "connected.",
    "I0000 00:00:1795571369.128841   19165 coordination_service.cc:1472] Barrier(WaitForAllTasks::6835694342961452267"
    "::0) has passed with status: OK",
    "I0000 00:00:1795571371.224583   18831 generator_dataset_op.cc:213] Memory patch applied: M_TRIM_THRESHOLD=128 kb "
    "was set.",
]
REAL = [
    "E0000 00:00:1795528118.697118   11197 op_kernel.cc:1857] OP_REQUIRES failed at save_restore_v2_ops.cc:150 : "
    "NOT_FOUND: backup/workertemp_0; No such file or directory",
    "W0000 00:00:1795528118.697118   11197 cuda_platform.cc:52] out of memory trying to allocate 2.00GiB",
    "Traceback (most recent call last):",
    "error: invalid input x.npz[x_test]: row 3 holds nan; expected finite numbers",
    "Epoch 1/2 - oneDNN custom operations are on. (a trainer's own line that merely quotes it)",
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR, and more",
    # near misses of the cluster lines: a real warning in the same files, a user's own lines quoting them
    "W0000 00:00:1795571371.248757   18831 dataset.cc:997] Input of GeneratorDatasetOp::Dataset will not be optimized "
    "because the dataset does not implement the AsGraphDefInternal() method needed to apply optimizations.",
    "E0000 00:00:1795571390.010110   19164 coordination_service.cc:1472] Barrier(WaitForAllTasks::1::0) has passed "
    "with status: DEADLINE_EXCEEDED",
    "Started server with target: grpc://127.0.0.1:36173",
    "I0000 00:00:1795571368.090971   18833 grpc_server_lib.cc:467] Started server with target: grpc://x and more",
    "/job:worker/replica:0/task:0",
]


@pytest.mark.parametrize("line", CHATTER + CLUSTER_CHATTER)
def test_known_start_up_lines_are_chatter(line):
    assert is_chatter(line) and is_chatter(line + "\n")


@pytest.mark.parametrize("line", REAL)
def test_real_lines_pass_through(line):
    assert not is_chatter(line)


def test_filters_keep_every_other_line_in_order():
    mixed = [CHATTER[0], REAL[0], CHATTER[2], REAL[2], CHATTER[5], REAL[3]]
    assert list(drop_chatter(line + "\n" for line in mixed)) == [REAL[0] + "\n", REAL[2] + "\n", REAL[3] + "\n"]
    assert without_chatter("\n".join(mixed) + "\n") == "\n".join([REAL[0], REAL[2], REAL[3]]) + "\n"


def test_replica_output_loses_the_chatter_but_not_the_error(tmp_path):
    """A real child process prints chatter and a real error to stderr; the prefixed output keeps the error only."""
    script = "import sys\n" + "".join(f"print({line!r}, file=sys.stderr)\n" for line in CHATTER + REAL[:1])
    replica = Replica("chief-0", "chief", (sys.executable, "-c", script), dict(os.environ), str(tmp_path))
    seen: list[str] = []
    logged: list[str] = []
    outcome = Runner([replica], sink=seen.append, on_line=lambda name, line: logged.append(line)).run()
    assert outcome.state == "SUCCEEDED"
    assert seen == [f"[chief-0] {REAL[0]}"]
    assert logged == [REAL[0]]  # what the emulator stores as the job's log


def test_quiet_native_startup_replays_what_is_not_chatter(capfd):
    with quiet_native_startup():
        os.write(2, (CHATTER[0] + "\n" + REAL[1] + "\n" + CHATTER[1] + "\n").encode())
    assert capfd.readouterr().err == REAL[1] + "\n"


def test_the_stragglers_listed_after_their_heading_go_with_it_and_nothing_more():
    """`Example stragglers:` is followed by one task name per line; those go, the first other line ends the list,
    and a task name anywhere else is a line like any other."""
    task_lines = ["/job:chief/replica:0/task:0", "/job:worker/replica:0/task:1"]
    lines = [CLUSTER_CHATTER[4], *task_lines, REAL[3], task_lines[0], CLUSTER_CHATTER[5]]
    assert list(drop_chatter(line + "\n" for line in lines)) == [REAL[3] + "\n", task_lines[0] + "\n"]
    assert without_chatter("\n".join([CLUSTER_CHATTER[4], *task_lines, "Epoch 1/2"])) == "Epoch 1/2"


def test_mlsubmit_and_the_trainer_share_one_recogniser():
    import mlsubmit.chatter
    import mlsubmit_runtime.chatter

    assert mlsubmit.chatter.is_chatter is mlsubmit_runtime.chatter.is_chatter
    assert mlsubmit.chatter.drop_chatter is mlsubmit_runtime.chatter.drop_chatter


# A real local job's replicas print none of these lines: tests/test_local_training.py's legacy master, worker and
# evaluator run with TensorFlow's INFO lines on (TF_CPP_MIN_LOG_LEVEL=0) asserts it.
