"""The five benchmarks that train (several processes, emulated devices, real clusters) run to completion in their
quick mode, each with a measured figure in its table (not a dash or an error), leaving nothing behind: see
tests/test_benchmarks.py for the others."""

from __future__ import annotations

import re

import pytest

from support.quick_benchmark import JAX_ONLY, NO_FRAMEWORK, TENSORFLOW_ONLY, run_quick

ONE_DEVICE_ROW = r"dense \| float32 \| auto \| 1 \| 4 \| [\d,]+ \| [\d,]+ \|"
# script and arguments -> (a pattern its output must hold, the environment it runs in: support/quick_benchmark.py)
QUICK = {
    # the data-parallel row on 2 emulated devices, measured beside plain Keras (a failure shows "—" and a note)
    "gpu_scaling.py": (re.compile(r"^dense \| float32 \| off \| 2 \| 8 \| [\d,]+ \| [\d,]+ \| [\d.]+× \|", re.M),
                       TENSORFLOW_ONLY),
    # the GPU script's CPU path, JAX only (its torch path is the same code; torch trains in test_trainer_backends.py):
    # a measured row beside plain Keras
    "gpu_input_pipeline.py --backends jax": (re.compile(rf"\[jax [^\]]+\]\n.*\n{ONE_DEVICE_ROW}"), JAX_ONLY),
    "keras_jax_gpu.py": (re.compile(r"^dense\s+float32\s+[\d,]+ images/s$", re.M), JAX_ONLY),
    # the tiny package through Dask beside --local (no TensorFlow: what the engine adds)
    "engines.py": (re.compile(r"^dask\s+\d+\.\d\s+\d+\.\d\d\s", re.M), NO_FRAMEWORK),
    "local_startup.py": (re.compile(r"^train --local, 1 replica, new package\s+\d+\.\ds\s+\d+\.\d\dx", re.M),
                         TENSORFLOW_ONLY),
}


@pytest.mark.parametrize("script", list(QUICK), ids=[s.split()[0] for s in QUICK])
def test_each_training_benchmark_runs_in_its_quick_mode(script, tmp_path):
    wanted, env = QUICK[script]
    run_quick(script, wanted, tmp_path, env)
