"""Run one script of benchmarks/ in its quick mode as the suite checks it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from support.without_frameworks import HIDDEN, VARIABLE

ROOT = Path(__file__).resolve().parents[2]

# The environment a quick mode runs in, beside a private TMPDIR. Its processes run without the frameworks it does
# not use (support/without_frameworks.py: as where they are not installed; when they are, TensorFlow and Keras import
# them at start-up, 2 CPU-s a process): a TensorFlow benchmark needs none of the others, a JAX one neither TensorFlow
# nor torch (JAX itself imports SciPy), a package that needs no framework none; and none calls a Google API
# (googleapiclient, which `import tensorflow` imports where it is installed). JAX's XLA compiles each step with LLVM's
# cheap passes only: on a CPU its optimisations were most of a JAX quick mode's time, and a quick mode proves the
# harness, it does not measure.
TENSORFLOW_ONLY = {VARIABLE: ",".join((*HIDDEN, "googleapiclient"))}
JAX_ONLY = {VARIABLE: "tensorflow,torch,sklearn,pandas,googleapiclient",
            "XLA_FLAGS": "--xla_backend_optimization_level=0 --xla_llvm_disable_expensive_passes=true"}
NO_FRAMEWORK = {VARIABLE: ",".join((*HIDDEN, "tensorflow", "googleapiclient"))}


def run_quick(script: str, wanted: str | re.Pattern, tmp_path: Path, env: dict[str, str] | None = None) -> str:
    """`python benchmarks/<script> --quick` from the checkout with a private TMPDIR and `env` (one of the above):
    it exits 0, its output holds `wanted` (a substring, or a pattern to search), and it leaves nothing in the
    checkout or the TMPDIR."""
    before = set(os.listdir(ROOT))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    name, *args = script.split()
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / name), *args, "--quick"], capture_output=True,
                          text=True, timeout=600, cwd=ROOT, env={**os.environ, **(env or {}), "TMPDIR": str(scratch)})
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    assert (wanted.search(said) if isinstance(wanted, re.Pattern) else wanted in said), said[-3000:]
    assert set(os.listdir(ROOT)) == before  # no results file left in the checkout
    assert [p.name for p in scratch.iterdir()] == []  # nor a temporary folder
    return said
