"""Run one script of benchmarks/ in its quick mode as the suite checks it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_quick(script: str, wanted: str | re.Pattern, tmp_path: Path) -> str:
    """`python benchmarks/<script> --quick` from the checkout with a private TMPDIR: it exits 0, its output holds
    `wanted` (a substring, or a pattern to search), and it leaves nothing in the checkout or the TMPDIR."""
    before = set(os.listdir(ROOT))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    name, *args = script.split()
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / name), *args, "--quick"], capture_output=True,
                          text=True, timeout=600, cwd=ROOT, env={**os.environ, "TMPDIR": str(scratch)})
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    assert (wanted.search(said) if isinstance(wanted, re.Pattern) else wanted in said), said[-3000:]
    assert set(os.listdir(ROOT)) == before  # no results file left in the checkout
    assert [p.name for p in scratch.iterdir()] == []  # nor a temporary folder
    return said
