#!/usr/bin/env python3
"""Ensemble prediction on a large input: `mlsubmit predict` vs the hand-written script it replaces.

Baseline (the recipe's script): load the whole input, scale it to float32, `model.predict` it with each model,
weight by the accuracy in each metrics.json, write every row with `np.savetxt`. Ours: `mlsubmit predict` on the
same job dirs (manifest verified, streamed in batches, CSV written atomically). Each run is its own process and
reports its own peak RSS (VmHWM: ru_maxrss would include this parent's memory at fork); TensorFlow's own ~0.7 GB
is in both.

    .venv/bin/python benchmarks/predict_memory.py [--rows 25000 100000] [--batch-size auto] [--keep-models DIR]

Prints wall time and peak RSS for each input size, the ratios, and the largest difference between the two
outputs' probabilities. The three job dirs are made by a TensorFlow process of their own before anything is timed;
`--keep-models DIR` (the suite's) keeps them in DIR under a digest of what makes them, made again only when that
changes.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SHAPE = (28, 28)  # MNIST-sized images: 784 bytes a row as uint8, 3,136 as float32
MEMBERS = 3

PEAK = r"""
import atexit, os
def _peak():
    with open("/proc/self/status") as status, open(os.environ["PEAK_FILE"], "w") as out:
        out.write(next(line for line in status if line.startswith("VmHWM")).split()[1])
atexit.register(_peak)
"""
OURS = PEAK + "import runpy, sys; sys.argv[0] = 'mlsubmit'; runpy.run_module('mlsubmit', run_name='__main__')"
BASELINE = PEAK + r"""
import json, sys
import numpy as np, keras
npz, out, dirs = sys.argv[1], sys.argv[2], sys.argv[3:]
x = np.load(npz)["x_test"].astype("float32")[..., None] / 255.0
probabilities, weights = [], []
for d in dirs:
    model = keras.models.load_model(f"{d}/model/model.keras")
    probabilities.append(model.predict(x, batch_size=256, verbose=0))
    weights.append(json.load(open(f"{d}/metrics.json"))["validation_accuracy"])
ensemble = sum(w * p for w, p in zip(weights, probabilities)) / sum(weights)
np.savetxt(out, ensemble, delimiter=",", fmt="%.17g")
"""


def make_job_dirs(root: Path) -> list[str]:
    """Three job dirs as the trainer lays them out (model.keras, metrics.json, MANIFEST.json), untrained weights."""
    import keras

    from mlsubmit_runtime.artifacts import build_manifest, write_json
    from trainer.models import build_model

    dirs = []
    for seed in range(MEMBERS):
        keras.utils.set_random_seed(seed)
        job = root / f"job{seed}"
        (job / "model").mkdir(parents=True)
        build_model(keras, "dense", (*SHAPE, 1), 10).save(job / "model" / "model.keras")
        write_json(job / "metrics.json", {"validation_accuracy": 0.9 + seed / 100, "test_accuracy": 0.9})
        write_json(job / "MANIFEST.json", build_manifest(job, sorted(p for p in job.rglob("*") if p.is_file())))
        dirs.append(str(job))
    return dirs


def made_job_dirs(root: Path) -> list[str]:
    """make_job_dirs(root) in a child, so this process never holds TensorFlow."""
    return json.loads(subprocess.run(
        [sys.executable, "-c", f"import json, sys; sys.path.insert(0, {str(ROOT)!r}); "
         f"from benchmarks.predict_memory import make_job_dirs; from pathlib import Path; "
         f"print(json.dumps(make_job_dirs(Path({str(root)!r}))))"],
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}, capture_output=True, text=True, check=True).stdout)


def kept_job_dirs(keep: Path) -> list[str]:
    """The job dirs kept in `keep` under the sha256 of what makes them (this script, the model factory, the manifest
    writer, Keras's and TensorFlow's versions), made (aside, then renamed into place) when missing; the folders this
    script kept there for other digests go."""
    digest = hashlib.sha256()
    for source in (Path(__file__), ROOT / "trainer" / "models.py", ROOT / "mlsubmit_runtime" / "artifacts.py"):
        digest.update(source.read_bytes())
    for package in ("keras", "tensorflow"):
        digest.update(importlib.metadata.version(package).encode())
    kept = keep / f"predict-memory-{digest.hexdigest()[:16]}"
    if not kept.is_dir():
        keep.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(prefix=".building-", dir=keep))
        try:
            made_job_dirs(building)
            os.replace(building, kept)
        except OSError:  # another run put them there first
            if not kept.is_dir():
                raise
        finally:
            shutil.rmtree(building, ignore_errors=True)
        for old in keep.glob("predict-memory-*"):
            if old != kept:
                shutil.rmtree(old, ignore_errors=True)
    return [str(kept / f"job{seed}") for seed in range(MEMBERS)]


def run(code: str, args: list[str], peak_file: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of `python -c code args…`."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PEAK_FILE": str(peak_file)}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{args[:3]} failed:\n{done.stderr[-2000:]}")
    return wall, int(peak_file.read_text()) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[25_000, 100_000])
    parser.add_argument("--batch-size", default="auto")
    parser.add_argument("--quick", action="store_true", help="2,000 rows: that the benchmark runs (the suite)")
    parser.add_argument("--keep-models", type=Path, default=None,
                        help="a folder where the job dirs are kept between runs (default: made anew each run)")
    args = parser.parse_args()
    if args.quick:
        args.rows = [2_000]
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor() or platform.machine())
    print(f"machine: {cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
          f"{MEMBERS} dense models on {SHAPE[0]}×{SHAPE[1]} uint8 images")
    with tempfile.TemporaryDirectory(prefix="predict-bench-") as tmp:
        root = Path(tmp)
        dirs = kept_job_dirs(args.keep_models) if args.keep_models else made_job_dirs(root)
        print(f"{'rows':>8} {'input MB':>9} | {'baseline s':>10} {'ours s':>7} {'ratio':>6} | "
              f"{'baseline MB':>11} {'ours MB':>8} {'ratio':>6} | max |Δp|")
        for rows in args.rows:
            npz = root / f"x{rows}.npz"
            x = np.random.default_rng(rows).integers(0, 256, size=(rows, *SHAPE), dtype=np.uint8)
            np.savez(npz, x_test=x)
            del x
            base_out, ours_out = root / "baseline.csv", root / "ours.csv"
            peak = root / "peak"
            base_s, base_mb = run(BASELINE, [str(npz), str(base_out), *dirs], peak)
            ours_s, ours_mb = run(OURS, ["predict", *dirs, "--input", str(npz), "--output", str(ours_out),
                                         "--batch-size", str(args.batch_size)], peak)
            base = np.loadtxt(base_out, delimiter=",")
            ours = np.loadtxt(ours_out, delimiter=",", skiprows=1, usecols=range(1, 11))
            diff = float(np.max(np.abs(base - ours)))
            print(f"{rows:>8} {npz.stat().st_size / 1e6:>9.1f} | {base_s:>10.1f} {ours_s:>7.1f} "
                  f"{ours_s / base_s:>6.2f} | {base_mb:>11.0f} {ours_mb:>8.0f} {ours_mb / base_mb:>6.2f} | {diff:.1e}")
            for path in (npz, base_out, ours_out):
                path.unlink()


if __name__ == "__main__":
    main()
