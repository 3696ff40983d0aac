"""The trainer's input pipeline on one GPU, JAX and torch, beside plain Keras with and without the same augmentation:
one command for a lent GPU machine (JAX and PyTorch preinstalled, no network), done within 10 minutes.

For each backend (jax, torch) and model (mnist_cnn, cifar10_vgg), one device: benchmarks/gpu_scaling.py's row (the
trainer's images/s, plain Keras without augmentation, plain Keras with the flip and padded crop as preprocessing
layers on the device, the trainer's pipeline alone, the share of step time the trainer waited for input), then all
rows in one table. Each (backend, model) runs under what is left of the time budget; one that runs out is reported
as such and the rest still print.

Keras not installed there: `--wheels DIR` installs it from wheels carried with the checkout (`pip download keras -d
DIR` on a machine with network; about 10 MB), into a temporary folder removed at the end, without the network.

    python benchmarks/gpu_input_pipeline.py [--budget 540] [--precision float32] [--samples 32768] [--epochs 4]
        [--batch-size 256] [--backends jax,torch] [--wheels DIR] [--json gpu_input_pipeline.json] [--quick]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BACKENDS = ("jax", "torch")
MODELS = ("mnist_cnn", "cifar10_vgg")


def _scaling():
    spec = importlib.util.spec_from_file_location("gpu_scaling", ROOT / "benchmarks" / "gpu_scaling.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def keras_path(wheels: str | None, scratch: Path) -> str | None:
    """A folder to put on PYTHONPATH with Keras installed offline from `wheels`, None when Keras is importable."""
    if importlib.util.find_spec("keras") is not None:
        return None
    if not wheels:
        raise SystemExit("error: Keras is not installed here; pass --wheels DIR with the wheels of keras and its "
                         "dependencies (pip download keras -d DIR, on a machine with network)")
    target = scratch / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--find-links", wheels,
                    "--target", str(target), "keras"], check=True)
    return str(target)


def one(backend: str, model: str, args, scratch: Path, env: dict, seconds: float) -> list[dict]:
    """gpu_scaling.py's rows for one backend and model on one device, or one row naming why there are none."""
    out = scratch / f"{backend}-{model}.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "gpu_scaling.py"), "--backend", backend, "--max-devices", "1",
           "--precision", args.precision, "--json", str(out)]
    cmd += ["--quick"] if args.quick else ["--models", model, "--samples", str(args.samples), "--epochs",
                                           str(args.epochs), "--batch-size", str(args.batch_size)]  # quick: its model
    unmeasured = {"model": model, "precision": args.precision, "xla": "auto", "n": 1,
                  "global_batch": args.batch_size, "backend": backend}
    # its own process group: a run past the budget ends with every process it started (trainer, baseline)
    with subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          start_new_session=True) as child:
        try:
            _, stderr = child.communicate(timeout=max(seconds, 1))
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
            return [{**unmeasured, "error": "not run: the time budget ran out"}]
    if child.returncode:
        tail = [line for line in stderr.strip().splitlines() if line.strip()][-1:] or ["failed"]
        return [{**unmeasured, "error": tail[0][:200]}]
    result = json.loads(out.read_text())
    device = ", ".join(result["devices"]["gpu_names"]) or result["devices"]["kind"]
    return [{**row, "backend": backend, "device": device, "backend_version": result["backend_version"]}
            for row in result["rows"]]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--budget", type=float, default=540, help="seconds for all measurements (default 540)")
    p.add_argument("--precision", default="float32", help="float32, mixed (mixed_float16 on a GPU) or both")
    p.add_argument("--samples", type=int, default=32768)
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--wheels", default=None, help="a folder of wheels to install Keras from where it is missing")
    p.add_argument("--json", default=None, help="where the rows go (default gpu_input_pipeline.json; none with "
                                                "--quick unless given)")
    p.add_argument("--backends", default=",".join(BACKENDS), help=f"comma-separated, of {', '.join(BACKENDS)} "
                                                                  "(default: both)")
    p.add_argument("--quick", action="store_true", help="gpu_scaling.py's quick mode for each backend, its model "
                                                        "only: that it runs (on any machine)")
    args = p.parse_args(argv)
    backends = tuple(b for b in BACKENDS if b in {part.strip() for part in args.backends.split(",")})
    if not backends:
        p.error(f"--backends: expected some of {', '.join(BACKENDS)}, received {args.backends!r}")
    if args.json is None and not args.quick:
        args.json = "gpu_input_pipeline.json"
    bench = _scaling()
    if args.quick:
        args.batch_size = bench.QUICK_BATCH  # gpu_scaling.py's quick mode
    deadline = time.monotonic() + args.budget
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="gpu-input-") as tmp:
        scratch = Path(tmp)
        site = keras_path(args.wheels, scratch)
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
        if site:
            env["PYTHONPATH"] = os.pathsep.join(filter(None, [site, env.get("PYTHONPATH")]))
        for backend in backends:
            for model in (bench.QUICK_MODEL,) if args.quick else MODELS:
                rows += one(backend, model, args, scratch, env, deadline - time.monotonic())
                print(f"  {backend} {model}: {rows[-1].get('trainer')} images/s {rows[-1].get('error', '')}",
                      file=sys.stderr, flush=True)
    devices = sorted({r["device"] for r in rows if r.get("device")}) or ["—"]
    print(f"{time.strftime('%Y-%m-%d')} · device: {', '.join(devices)} · one device, per backend; keras = plain "
          "model.fit without augmentation, keras+aug = with the flip and padded crop as preprocessing layers")
    for backend in backends:
        mine = [r for r in rows if r["backend"] == backend]
        version = next((r["backend_version"] for r in mine if r.get("backend_version")), "?")
        print(bench.render(bench.summarise(mine), f"[{backend} {version}]"))
    bench.save(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
