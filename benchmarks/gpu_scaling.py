"""Data-parallel scaling of the trainer on this machine's GPUs, beside plain Keras on one device, in one run.

For each model (`cifar10_vgg` on 32x32x3, `mnist_cnn` on 28x28x1; synthetic data, 10 classes) and each precision ×
XLA variant, for N = 1, 2, 4, … up to the devices the machine has:

- trainer: `python -m trainer.task --gpus N` (per-replica batch B, global batch N×B), images/s from its metrics.json;
- plain Keras: numpy arrays into `model.fit` on one device, same model and global batch N×B (the recipes' script),
  without augmentation;
- plain Keras with the same augmentation, for models whose recipe augments (cifar10_vgg): the flip and padded crop as
  Keras 3 writes it on every backend, preprocessing layers in front of the model (RandomFlip, and RandomTranslation
  by up to 4 pixels with zero fill), so they run on the device inside the compiled step;
- input pipeline alone: the trainer's own pipeline (tf.data; on jax and torch trainer.batches with its producer
  threads) at that global batch, iterated with no model, so a GPU the pipeline cannot feed shows (pipeline images/s
  near or under the training images/s: input-bound);
- input wait: the share of the trainer's step time its training loop waited for a batch that was not made yet
  (measured by the trainer on jax and torch; tf.data does not tell, "—").

Per N: speedup over the trainer on 1 device, scaling efficiency (speedup / N), the ratios to plain Keras with and
without the augmentation at the same global batch. Images/s leave out the first epoch (tracing, XLA compilation).
Every run is a fresh process.

`--backend jax|torch` measures the trainer's Keras 3 route on that backend instead, without TensorFlow (its numpy input
pipeline, plain Keras on the same backend; nothing here imports TensorFlow then, and `--python` runs every process
with another interpreter, e.g. a venv where TensorFlow is not installed): JAX trains data-parallel over N devices
(emulated: XLA host-platform devices), torch on one device (Keras 3.15 distributes only on JAX and TensorFlow).
XLA: `auto` lets Keras choose (JAX compiles every step), the default on jax and torch.

On a machine without GPUs the N devices are logical CPU devices (`--emulate-devices`): they share the same cores, so
the figures show the data-parallel path's overhead, not a speedup; the output says so. Mixed precision is
`mixed_float16` on GPUs and `mixed_bfloat16` on CPUs (float16 arithmetic is emulated, and slow, on CPUs).
XLA on with N ≥ 2 is not run: Keras 3 cannot XLA-compile a MirroredStrategy step (the trainer refuses it).

    python benchmarks/gpu_scaling.py [--quick] [--models cifar10_vgg,mnist_cnn] [--samples 8192] [--epochs 3]
        [--batch-size 128] [--max-devices N] [--emulate-devices N] [--precision float32,mixed|mixed_bfloat16]
        [--xla off,on,auto] [--backend tensorflow|jax|torch] [--python PYTHON]
        [--repeats 1] [--json gpu_scaling.json]
"""

from __future__ import annotations

import argparse
import datetime
import glob
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHAPES = {"cifar10_vgg": "32x32x3", "mnist_cnn": "28x28x1"}
# --quick's model: the trainer's small MLP on mnist_cnn's images (a convnet's tracing was a third of a quick run's CPU)
QUICK_MODEL, QUICK_SHAPE = "dense", SHAPES["mnist_cnn"]
MIXED = {"GPU": "mixed_float16", "CPU": "mixed_bfloat16"}
QUICK_SAMPLES, QUICK_BATCH = 16, 4  # --quick's synthetic samples and per-replica batch

# One process per backend: what it sees (device count and GPU model) and its version; JAX and torch without TF.
PROBES = {
    "tensorflow": r"""
import json, tensorflow as tf
gpus = tf.config.list_physical_devices("GPU")
names = [tf.config.experimental.get_device_details(g).get("device_name", "GPU") for g in gpus]
print(json.dumps({"gpus": len(gpus), "gpu_names": names, "version": tf.__version__}))
""",
    "jax": r"""
import json, jax
try:
    gpus = jax.devices("gpu")
except RuntimeError:
    gpus = []
print(json.dumps({"gpus": len(gpus), "gpu_names": [g.device_kind for g in gpus], "version": jax.__version__}))
""",
    "torch": r"""
import json, torch
n = torch.cuda.device_count()
print(json.dumps({"gpus": n, "gpu_names": [torch.cuda.get_device_name(i) for i in range(n)],
                  "version": torch.__version__}))
""",
}
# --quick where no GPU can be seen: the backend's version without starting it (its distribution's, e.g. tensorflow-cpu)
VERSION = r"""
import importlib.metadata as m, sys
names = sorted(m.packages_distributions().get(sys.argv[1], []), key=lambda name: (name != sys.argv[1], len(name)))
print(m.version(names[0]) if names else "?")
"""
GPU_NODES = ("/dev/nvidia[0-9]*", "/dev/kfd", "/dev/dxg")  # NVIDIA's, ROCm's and WSL's: no backend sees a GPU without

# One process per (model, variant, global batch): the trainer's pipeline alone, then plain Keras on one device, on
# the backend KERAS_BACKEND names (tf.data on tensorflow; trainer.batches, without TensorFlow, on jax and torch).
BASELINE = r"""
import contextlib, json, sys, time
import numpy as np, keras
from trainer import pipeline
from trainer.backend_train import tensorflow_unprobed
from trainer.callbacks import EpochTimer
from trainer.data import load
from trainer.models import MODELS, build_model
model_name, spec, batch, epochs, precision, xla = sys.argv[1:7]
batch, epochs = int(batch), int(epochs)
a = load(spec, validation_split=0.0, seed=42)
backend = keras.backend.backend()
pipes = pipeline.build(a, per_replica_batch=batch, replicas=1, seed=42, augment=MODELS[model_name].augment,
                       backend=backend)
it = iter(pipes.train) if backend == "tensorflow" else (pipes.train[i] for i in range(2**62))
for _ in range(pipes.steps_per_epoch):  # first epoch: warm-up (tracing, autotune)
    next(it)
t = time.perf_counter()
for _ in range(pipes.steps_per_epoch * max(epochs - 1, 1)):
    x, y = next(it)
np.asarray(x)
pipe = pipes.steps_per_epoch * batch * max(epochs - 1, 1) / (time.perf_counter() - t)
pipes.close()
def plain_keras(augment):
    keras.utils.set_random_seed(42)
    keras.mixed_precision.set_global_policy(precision)
    model = build_model(keras, model_name, a.input_shape, a.num_classes)
    if augment:  # Keras 3's idiom: preprocessing layers in front of the model, run on the device in the step;
        # a shift of up to 4 pixels with zero fill is the padded crop (ZeroPadding2D + RandomCrop does not build:
        # Keras 3.15's RandomCrop returns the padded size when not training)
        height, width = a.input_shape[:2]
        shift = keras.layers.RandomTranslation(4 / height, 4 / width, fill_mode="constant", interpolation="nearest",
                                               seed=42)
        model = keras.Sequential([keras.Input(a.input_shape), keras.layers.RandomFlip("horizontal", seed=42), shift,
                                  model])
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"],
                  jit_compile={"on": True, "off": False}.get(xla, "auto"))
    timer = EpochTimer((len(a.x_train) // batch) * batch)  # the trainer's own clock: first epoch left out
    model.fit(a.x_train, a.y_train, batch_size=batch, epochs=epochs, verbose=0, callbacks=[timer])
    return timer.samples_per_second, bool(model.jit_compile)
# as the trainer on jax and torch: Keras's probes (set_random_seed) would import TensorFlow where it is installed
with tensorflow_unprobed() if backend != "tensorflow" else contextlib.nullcontext():
    keras_aug = plain_keras(True)[0] if MODELS[model_name].augment else None
    plain, jit = plain_keras(False)
print(json.dumps({"keras": plain, "keras_aug": keras_aug, "pipeline": pipe, "jit_compile": jit}))
"""


def ladder(available: int, limit: int | None = None) -> list[int]:
    """Device counts to measure: 1, 2, 4, … up to `available` (capped by `limit`), and that count itself."""
    top = min(available, limit) if limit else available
    counts, n = [], 1
    while n <= top:
        counts.append(n)
        n *= 2
    if top >= 1 and counts[-1] != top:
        counts.append(top)
    return counts


def summarise(rows: list[dict]) -> list[dict]:
    """Add speedup, efficiency, the plain-Keras ratio and the input-bound verdict to each measured row (pure).

    Rows of one (model, precision, xla) series share the trainer's 1-device figure as their reference.
    """
    ones = {(r["model"], r["precision"], r["xla"]): r.get("trainer") for r in rows if r["n"] == 1}
    out = []
    for r in rows:
        r = dict(r)
        one, ours, keras, pipe = ones.get((r["model"], r["precision"], r["xla"])), r.get("trainer"), \
            r.get("keras"), r.get("pipeline")
        r["speedup"] = round(ours / one, 3) if ours and one else None
        r["efficiency"] = round(ours / (one * r["n"]), 3) if ours and one else None
        r["vs_keras"] = round(ours / keras, 3) if ours and keras else None
        r["vs_keras_aug"] = round(ours / r["keras_aug"], 3) if ours and r.get("keras_aug") else None
        r["pipeline_headroom"] = round(pipe / ours, 2) if ours and pipe else None
        r["input_bound"] = r["pipeline_headroom"] < 1.2 if r["pipeline_headroom"] else None
        out.append(r)
    return out


def _fmt(value, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def render(rows: list[dict], header: str) -> str:
    """The results as a fixed-width text table (pure)."""
    cols = ("model", "precision", "xla", "N", "batch", "trainer img/s", "keras img/s", "vs keras", "speedup",
            "efficiency", "pipeline img/s", "keras+aug img/s", "vs keras+aug", "input wait", "note")
    lines = [header, " | ".join(cols)]
    for r in rows:
        note = r.get("error") or ("input-bound" if r.get("input_bound") else "")
        lines.append(" | ".join([
            r["model"], r["precision"], r["xla"], str(r["n"]), str(r["global_batch"]), _fmt(r.get("trainer"), ",.0f"),
            _fmt(r.get("keras"), ",.0f"), _fmt(r.get("vs_keras"), ".2f") + ("×" if r.get("vs_keras") else ""),
            _fmt(r.get("speedup"), ".2f") + ("×" if r.get("speedup") else ""),
            _fmt(r["efficiency"] * 100 if r.get("efficiency") else None, ".0f") + ("%" if r.get("efficiency") else ""),
            _fmt(r.get("pipeline"), ",.0f"), _fmt(r.get("keras_aug"), ",.0f"),
            _fmt(r.get("vs_keras_aug"), ".2f") + ("×" if r.get("vs_keras_aug") else ""),
            _fmt(None if r.get("input_wait") is None else r["input_wait"] * 100, ".1f")
            + ("%" if r.get("input_wait") is not None else ""), note]))
    return "\n".join(lines)


PYTHON = [sys.executable]  # main() sets --python here: every measured process runs on it
BACKEND = {"KERAS_BACKEND": "tensorflow"}  # main() sets --backend here: plain Keras and the probe run on it


def _python(args: list[str], check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **BACKEND,
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([*PYTHON, *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if check and done.returncode:
        raise RuntimeError(_last_line(done.stderr) or f"exit code {done.returncode}")
    return done


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else ""


def run_trainer(model: str, spec: str, n: int, emulate: int, args, precision: str, xla: str):
    """(images/s, input wait fraction or None) of `python -m trainer.task` on N devices."""
    with tempfile.TemporaryDirectory() as job:
        cmd = ["-m", "trainer.task", "--job-dir", job, "--model", model, "--data", spec, "--epochs", str(args.epochs),
               "--batch-size", str(args.batch_size), "--validation-split", "0", "--patience", "1000",
               "--gpus", str(n), "--precision", precision, "--jit-compile", xla, "--backend", args.backend]
        if emulate:
            cmd += ["--emulate-devices", str(emulate)]
        _python(cmd)
        metrics = json.loads(Path(job, "metrics.json").read_text())
        return metrics["samples_per_second"], metrics.get("input_wait_fraction")


def run_baseline(model: str, spec: str, global_batch: int, args, precision: str, xla: str) -> dict:
    out = _python(["-c", BASELINE, model, spec, str(global_batch), str(args.epochs), precision, xla]).stdout
    return json.loads(out.strip().splitlines()[-1])


def measure(args, emulate: int, counts: list[int], kind: str) -> list[dict]:
    rows = []
    for model in args.models:
        spec = f"synthetic:{SHAPES.get(model, QUICK_SHAPE)}:10:{args.samples}"
        for precision in (MIXED[kind] if p == "mixed" else p for p in args.precision):
            for xla in args.xla:
                for n in counts:
                    global_batch = args.batch_size * n
                    row = {"model": model, "precision": precision, "xla": xla, "n": n, "global_batch": global_batch}
                    runs: dict[str, list[float]] = {"keras": [], "keras_aug": [], "pipeline": [], "trainer": [],
                                                    "input_wait": []}
                    try:
                        for _ in range(args.repeats):  # interleaved, so a busy spell hits both sides alike
                            base = run_baseline(model, spec, global_batch, args, precision, xla)
                            for key in ("keras", "keras_aug", "pipeline"):
                                if base.get(key) is not None:
                                    runs[key].append(round(base[key], 1))
                            if skip(args.backend, xla, n):
                                row["error"] = skip(args.backend, xla, n)
                            else:
                                ours, wait = run_trainer(model, spec, n, emulate, args, precision, xla)
                                runs["trainer"].append(ours)
                                if wait is not None:
                                    runs["input_wait"].append(wait)
                    except RuntimeError as err:
                        row["error"] = str(err)
                    row.update({k: round(statistics.median(v), 1 if k != "input_wait" else 4)
                                for k, v in runs.items() if v})
                    row["runs"] = {k: v for k, v in runs.items() if v}
                    rows.append(row)
                    print(f"  {model} {precision} xla={xla} N={n}: trainer {row.get('trainer')}, "
                          f"keras {row.get('keras')}, keras+aug {row.get('keras_aug')}, pipeline "
                          f"{row.get('pipeline')}, input wait {row.get('input_wait')} {row.get('error', '')}",
                          file=sys.stderr, flush=True)
    return rows


def skip(backend: str, xla: str, n: int) -> str | None:
    """Why the trainer is not run for this cell (the trainer refuses it), None when it is (pure)."""
    if backend == "tensorflow" and xla == "on" and n >= 2:
        return "not run: Keras 3 cannot XLA-compile a MirroredStrategy step"
    if backend == "torch" and n >= 2:
        return "not run: torch trains on one device (Keras 3.15 distributes only on JAX and TensorFlow)"
    if backend == "torch" and xla == "on":
        return "not run: the trainer does not run torch.compile (--jit-compile on)"
    return None


def _csv(choices: tuple[str, ...]):
    def parse(text: str) -> list[str]:
        items = [t.strip() for t in text.split(",") if t.strip()]
        bad = [t for t in items if t not in choices]
        if not items or bad:
            raise argparse.ArgumentTypeError(f"received {text!r}; expected a comma-separated list of "
                                             + ", ".join(choices))
        return items

    return parse


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", type=_csv(tuple(SHAPES)), default=list(SHAPES))
    p.add_argument("--samples", type=int, default=8192, help="synthetic training samples per model")
    p.add_argument("--epochs", type=int, default=3, help="epochs per run; the first is left out of images/s")
    p.add_argument("--batch-size", type=int, default=128, help="per-replica batch (global: this × N)")
    p.add_argument("--max-devices", type=int, default=None, help="measure up to this many devices")
    p.add_argument("--emulate-devices", type=int, default=None,
                   help="use N logical CPU devices even where GPUs exist (default: the GPUs, else 2 emulated)")
    p.add_argument("--precision", type=_csv(("float32", "mixed", "mixed_float16", "mixed_bfloat16")),
                   default=["float32", "mixed"], help="mixed: mixed_float16 on GPUs, mixed_bfloat16 on CPUs")
    p.add_argument("--xla", type=_csv(("off", "on", "auto")), default=None,
                   help="default: off,on on tensorflow; auto (Keras's choice: JAX compiles every step) on jax and torch")
    p.add_argument("--backend", choices=("tensorflow", "jax", "torch"), default="tensorflow",
                   help="the Keras backend the trainer and plain Keras run on (jax and torch need no TensorFlow)")
    p.add_argument("--python", default=sys.executable,
                   help="the interpreter of every measured process (e.g. a venv without TensorFlow)")
    p.add_argument("--repeats", type=int, default=1, help="runs of each measurement; the median is reported")
    p.add_argument("--json", default=None,
                   help="where the results go (default gpu_scaling.json; none with --quick unless given)")
    p.add_argument("--quick", action="store_true",
                   help=f"smoke test: {QUICK_MODEL} ({QUICK_SHAPE}), {QUICK_SAMPLES} samples, batch {QUICK_BATCH}, "
                        "2 epochs, float32, XLA off, only N = 2 (the data-parallel path; no speedup column without "
                        "N = 1); on a machine without a GPU device node the probe does not start the backend")
    args = p.parse_args(argv)
    if args.xla is None:
        args.xla = ["off", "on"] if args.backend == "tensorflow" else ["auto"]
    if args.json is None and not args.quick:
        args.json = "gpu_scaling.json"
    if args.quick:
        # 2-4 steps of a few images an epoch, of the smallest model (mnist_cnn's tracing and ~1.5 GFLOP an image
        # were a third of the run's CPU): the quick mode proves that the harness makes every column, it does not
        # measure
        args.models, args.samples, args.batch_size, args.epochs = [QUICK_MODEL], QUICK_SAMPLES, QUICK_BATCH, 2
        args.precision, args.max_devices = ["float32"], min(args.max_devices or 2, 2)
        args.xla = ["off"] if args.backend == "tensorflow" else ["auto"]
    if min(args.samples, args.epochs, args.batch_size, args.repeats) < 1 or args.epochs < 2:
        p.error("--samples, --batch-size and --repeats must be ≥ 1 and --epochs ≥ 2 (the first epoch is left out)")
    return args


def probe_devices(backend: str, quick: bool) -> dict:
    """{"gpus", "gpu_names", "version"} as the backend sees them, from a process of its own; --quick on a machine
    with no GPU device node (GPU_NODES) does not start the backend there: no GPUs, and the installed version."""
    if quick and not any(glob.glob(pattern) for pattern in GPU_NODES):
        return {"gpus": 0, "gpu_names": [], "version": _python(["-c", VERSION, backend]).stdout.strip()}
    return json.loads(_python(["-c", PROBES[backend]]).stdout.strip().splitlines()[-1])


def save(path: str | None, result) -> None:
    """Write the results as JSON to `path` and say where (nothing when `path` is None)."""
    if path:
        Path(path).write_text(json.dumps(result, indent=2) + "\n")
        print(f"results: {path}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    PYTHON[:] = [args.python]
    BACKEND["KERAS_BACKEND"] = args.backend
    probe = probe_devices(args.backend, args.quick)
    emulate = args.emulate_devices if args.emulate_devices is not None else (0 if probe["gpus"] else 2)
    kind = "CPU" if emulate else "GPU"
    counts = ladder(emulate or probe["gpus"], args.max_devices)
    if args.backend == "torch":
        counts = counts[:1]  # one device: Keras 3.15 distributes only on JAX and TensorFlow
    elif args.quick:
        counts = counts[-1:]
    if emulate:
        devices = (f"{emulate} emulated CPU devices (logical devices sharing {os.cpu_count()} cores: NOT GPUs; the "
                   "figures show the data-parallel path's overhead, not GPU scaling)")
    else:
        devices = f"{probe['gpus']} × {probe['gpu_names'][0]}"
    header = (f"{datetime.date.today()} · {platform.machine()}, {os.cpu_count()} cores, Python "
              f"{platform.python_version()}, backend {args.backend} {probe['version']} · devices: {devices}\n"
              f"{args.samples} synthetic samples per model, per-replica batch {args.batch_size}, {args.epochs} epochs "
              f"(first left out), median of {args.repeats}; keras = plain model.fit on one device at the same global "
              "batch, no augmentation; keras+aug = the same with the model's flip and padded crop as Keras "
              "preprocessing layers (on the device); efficiency = speedup over the trainer on 1 device / N; "
              f"pipeline = the trainer's {'tf.data' if args.backend == 'tensorflow' else 'numpy (no TensorFlow)'} "
              "pipeline alone; input wait = share of the trainer's step time spent waiting for a batch")
    print(header.splitlines()[0], file=sys.stderr, flush=True)
    rows = summarise(measure(args, emulate, counts, kind))
    result = {"date": str(datetime.date.today()), "machine": platform.machine(), "cores": os.cpu_count(),
              "python": platform.python_version(), "backend": args.backend, "backend_version": probe["version"],
              "interpreter": args.python,
              "devices": {"kind": "emulated CPU" if emulate else "GPU", "count": emulate or probe["gpus"],
                          "gpu_names": probe["gpu_names"], "emulated": bool(emulate)},
              "settings": {k: getattr(args, k) for k in ("models", "samples", "epochs", "batch_size", "precision",
                                                         "xla", "repeats", "quick", "backend")},
              "device_counts": counts, "rows": rows}
    print(render(rows, header))
    save(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
