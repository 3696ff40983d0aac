"""The scripts behind the README's performance table run to completion in their quick mode (`--quick`), so they
cannot rot unnoticed: each prints its table and leaves nothing behind in the checkout or the temporary folder.

The four whose quick mode alone takes 40–90 s on 2 cores (gpu_scaling, keras_jax_gpu, engines, local_startup) are
not run here: the suite is over its 10-minute budget already (see the README's Tests section)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# script and arguments -> a line its output must hold
QUICK = {
    "cli_startup.py": "heavy imports in 'mlsubmit config --tier CUSTOM --gpus 4': none",
    "package_stage.py": "pre-flight in a fresh venv",
    "local_launcher.py": "| through replica.py |",
    "test_files.py tests/test_discovery.py": "current/baseline",
    "predict_memory.py": "2000",
    "dry_run.py": "× the bare import",
    "trainer_throughput.py": "[tensorflow] ratio ours/baseline:",
    "emulator_overhead.py": "emulator overhead per job:",
    "byo_trainer.py": "mlsubmit train --local, cached venv",
    "submit.py": "| resubmission, unchanged package |",
}


@pytest.mark.parametrize("script", list(QUICK), ids=[s.split()[0] for s in QUICK])
def test_each_benchmark_runs_in_its_quick_mode(script, tmp_path):
    before = set(os.listdir(ROOT))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    name, *args = script.split()
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / name), *args, "--quick"], capture_output=True,
                          text=True, timeout=600, cwd=ROOT, env={**os.environ, "TMPDIR": str(scratch)})
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert QUICK[script] in done.stdout + done.stderr, (done.stdout + done.stderr)[-3000:]
    assert set(os.listdir(ROOT)) == before  # no results file left in the checkout
    assert [p.name for p in scratch.iterdir()] == []  # nor a temporary folder


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
