"""The scripts behind the README's performance table run to completion in their quick mode (`--quick`), so they
cannot rot unnoticed: each prints its table and leaves nothing behind in the checkout or the temporary folder. A
quick mode proves the harness, it does not measure: the fewest processes and steps that make one measured row beside
its baseline. The five that train on several processes or clusters are in tests/test_benchmarks_training.py (a file
of their own, so the two test workers share them); every script in benchmarks/ is in one of the two but the SDK
comparison, which needs the `bench` extra (its missing-extra line is tested here instead), and input_pipeline.py
(three JAX producers compared, ~20 CPU-s in its quick mode: run by hand)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from support.built_wheel import mlsubmit_wheel
from support.quick_benchmark import NO_FRAMEWORK, TENSORFLOW_ONLY, run_quick

ROOT = Path(__file__).resolve().parent.parent
# predict_memory.py's three job dirs, kept between runs beside the suite's wheels (the script keeps one set, under a
# digest of what makes them): one TensorFlow process less a run
KEPT_MODELS = Path.home() / ".cache" / "mlsubmit" / "test-bench-models"
# script and arguments -> (a line its output must hold: a substring, or a pattern to search; the environment it runs
# in: support/quick_benchmark.py)
QUICK = {
    "cli_startup.py": ("heavy imports in 'mlsubmit config --tier CUSTOM --gpus 4': none", None),
    "package_stage.py": ("pre-flight in a fresh venv", None),
    "local_launcher.py": ("| through replica.py |", None),
    "test_files.py tests/test_discovery.py": ("current/baseline", None),
    "predict_memory.py": ("2000", TENSORFLOW_ONLY),
    "dry_run.py": ("× the bare import", TENSORFLOW_ONLY),
    "trainer_throughput.py": ("[tensorflow] ratio ours/baseline:", TENSORFLOW_ONLY),
    "emulator_overhead.py": ("emulator overhead per job:", None),
    "emulator_burst.py": ("| this version (sock_diag, backlog 1024) | 50/50 |", None),
    # one measured row beside its baseline, with the ratio; the package needs tabulate alone, and gcloud's two
    # TensorFlow probes (`import tensorflow` in the python on PATH) find none, as in a Python with what it needs
    "byo_trainer.py": (re.compile(r"^mlsubmit train --local, edited package \(sdist, job env\)\s+[\d.]+s\s+[\d.]+x",
                                  re.M), NO_FRAMEWORK),
    "submit.py": (re.compile(r"^\| resubmission, unchanged package \| [\d.]+ s \| [\d.]+ s \| [\d.]+× \w+ \| ours: "
                             r"already staged, 0 bytes sent;", re.M), None),
    "install.py": ("mlsubmit --help in the core's venv:", None),
}


@pytest.mark.parametrize("script", list(QUICK), ids=[s.split()[0] for s in QUICK])
def test_each_benchmark_runs_in_its_quick_mode(script, tmp_path):
    wanted, env = QUICK[script]
    if script == "install.py":  # it installs the wheel the suite built from this checkout (support/built_wheel.py)
        script = f"{script} --wheel {mlsubmit_wheel()}"
    elif script == "predict_memory.py":
        script = f"{script} --keep-models {KEPT_MODELS}"
    run_quick(script, wanted, tmp_path, env)


def test_the_sdk_comparison_says_what_it_needs_when_the_bench_extra_is_missing():
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "sdk_package_stage.py"), "--quick"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    try:
        import google.cloud.aiplatform  # noqa: F401
    except ImportError:
        assert done.returncode == 2 and done.stderr.strip() == ("google-cloud-aiplatform is not installed: pip "
                                                                 "install -e '.[bench]'")
    else:
        assert done.returncode == 0, done.stderr[-3000:]
