"""TrainConfig (frozen) and its strict command-line parser.

Unknown flags are an error with a did-you-mean (unlike `parse_known_args`, which silently swallows them). When
`--job-dir` is absent on Vertex AI, the base output directory the service passes is used: AIP_MODEL_DIR is
`<base>/model/`; AIP_CHECKPOINT_DIR and AIP_TENSORBOARD_LOG_DIR are honoured for backups and TensorBoard logs.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from trainer.backends import BACKENDS
from trainer.backends import resolve as resolve_backend
from trainer.errors import TrainerError, invalid, suggest
from trainer.models import MODELS

OPTIMIZERS = ("adam", "sgd", "rmsprop")
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")  # Keras dtype policies
JIT_COMPILE = ("auto", "on", "off")
AUGMENT = ("auto", "on", "off")


@dataclass(frozen=True)
class TrainConfig:
    job_dir: str
    model: str = "dense"
    data: str = "synthetic"
    epochs: int = 10
    batch_size: int = 64  # per replica; the global batch is batch_size × replicas
    learning_rate: float | None = None  # None: the optimizer's default
    optimizer: str = "adam"
    validation_split: float = 0.1
    patience: int = 5
    gpus: str = "auto"  # "auto" or a whole number as text
    emulate_devices: int = 0
    seed: int = 42
    precision: str = "float32"  # the Keras dtype policy the model is built under
    jit_compile: str = "auto"  # XLA: auto (on for one GPU, off on CPUs and with several replicas), on or off
    steps_per_epoch: int | None = None
    dry_run: bool = False
    checkpoint_dir: str | None = None  # where BackupAndRestore keeps its state; default <job_dir>/backup
    tensorboard_dir: str | None = None  # default <job_dir>/logs
    job_dir_is_temporary: bool = False
    backend: str = "tensorflow"  # the Keras backend: tensorflow, jax or torch (trainer.backends)
    augment: str = "auto"  # random flip and padded crop: auto (the model's recipe), on or off
    input_workers: int | None = None  # threads making batches ahead of the step; None: auto (trainer.pipeline)

    @property
    def gpu_count(self) -> int | None:
        """The requested device count, or None for "auto"."""
        return None if self.gpus == "auto" else int(self.gpus)


class _StrictParser(argparse.ArgumentParser):
    """argparse that reports an unknown flag as one line with a did-you-mean, exit code 2."""

    def error(self, message: str):  # noqa: D401 - argparse API
        raise TrainerError(message)

    def parse_strict(self, argv: Sequence[str]) -> argparse.Namespace:
        namespace, extras = self.parse_known_args(argv)
        if extras:
            known = [s for a in self._actions for s in a.option_strings]
            flag = extras[0].split("=", 1)[0]
            raise TrainerError(f"unknown argument {extras[0]!r}{suggest(flag, known)}; see --help for the flags")
        return namespace


def _ascii(text: str) -> str:
    """Numbers as ASCII only: int() and float() also read other scripts' digits (`--epochs ٣` as 3)."""
    if not text.isascii():
        raise ValueError(text)
    return text


def _positive_int(name: str, minimum: int = 1):
    def parse(text: str) -> int:
        try:
            value = int(_ascii(text))
        except ValueError:
            raise invalid(name, text, f"a whole number ≥ {minimum}") from None
        if value < minimum:
            raise invalid(name, text, f"a whole number ≥ {minimum}")
        return value

    return parse


def _gpus(text: str) -> str:
    if text == "auto":
        return text
    _positive_int("--gpus", 0)(text)
    return str(int(text))


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity, e.g. a container's share), else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def _input_workers(text: str) -> int | None:
    if text == "auto":
        return None
    cores = usable_cores()
    expected = f"auto or a whole number from 1 to {cores} (the CPU cores this host gives the trainer)"
    try:
        value = int(_ascii(text))
    except ValueError:
        raise invalid("--input-workers", text, expected) from None
    if not 1 <= value <= cores:
        raise invalid("--input-workers", text, expected, hint="use --input-workers auto")
    return value


def _fraction(text: str) -> float:
    try:
        value = float(_ascii(text))
    except ValueError:
        raise invalid("--validation-split", text, "a number in [0, 0.9]") from None
    if not 0.0 <= value <= 0.9:
        raise invalid("--validation-split", text, "a number in [0, 0.9]")
    return value


def _learning_rate(text: str) -> float:
    try:
        value = float(_ascii(text))
    except ValueError:
        raise invalid("--learning-rate", text, "a positive number such as 0.001") from None
    if not value > 0:
        raise invalid("--learning-rate", text, "a positive number such as 0.001")
    return value


def _choice(name: str, choices: Sequence[str]):
    def parse(text: str) -> str:
        if text not in choices:
            raise invalid(name, text, "one of " + ", ".join(choices), hint=suggest(text, choices).strip(" ()") or None)
        return text

    return parse


def build_parser() -> _StrictParser:
    p = _StrictParser(prog="python -m trainer.task", allow_abbrev=False,
                      description="Train a Keras model data-parallel on every GPU of this machine (or a cluster "
                      "from TF_CONFIG) and save the template model, metrics and plots to the job directory.")
    p.add_argument("--job-dir", help="where artifacts go: a local path or gs://bucket/prefix "
                   "(default on Vertex AI: the base output directory; with --dry-run: a temporary directory)")
    p.add_argument("--model", type=_choice("--model", tuple(MODELS)), default="dense",
                   help="architecture: " + ", ".join(MODELS))
    p.add_argument("--data", default="synthetic", help="synthetic[:HxWxC[:CLASSES[:SAMPLES]]], a .npz path "
                   "(local or gs://) with x_train/y_train/x_test/y_test, mnist or cifar10")
    p.add_argument("--epochs", type=_positive_int("--epochs"), default=10)
    p.add_argument("--batch-size", type=_positive_int("--batch-size"), default=64,
                   help="per-replica batch; the global batch is this × replicas")
    p.add_argument("--learning-rate", type=_learning_rate, default=None)
    p.add_argument("--optimizer", type=_choice("--optimizer", OPTIMIZERS), default="adam")
    p.add_argument("--validation-split", type=_fraction, default=0.1)
    p.add_argument("--patience", type=_positive_int("--patience"), default=5,
                   help="EarlyStopping patience in epochs (on validation loss; best weights restored)")
    p.add_argument("--gpus", type=_gpus, default="auto", help="auto (all) or N (the first N; 0 = CPU)")
    p.add_argument("--emulate-devices", type=_positive_int("--emulate-devices", 0), default=0,
                   help="split the CPU into N logical devices so the N-replica path runs without GPUs "
                   "(default: $MLSUBMIT_EMULATE_DEVICES, or 0)")
    p.add_argument("--seed", type=_positive_int("--seed", 0), default=42)
    p.add_argument("--precision", type=_choice("--precision", PRECISIONS), default="float32",
                   help="dtype policy: float32, mixed_float16 (GPUs with tensor cores; loss scaling is automatic) "
                   "or mixed_bfloat16 (H100/A100, TPUs, recent CPUs)")
    p.add_argument("--jit-compile", type=_choice("--jit-compile", JIT_COMPILE), default="auto",
                   help="compile the training step with XLA: auto (on for one GPU, as plain Keras does; off on "
                   "CPUs and with several replicas, which Keras 3 cannot compile), on or off")
    p.add_argument("--backend", default=None, help="the Keras backend: " + ", ".join(BACKENDS) + " (default: "
                   "$KERAS_BACKEND, or tensorflow; this flag overrides it); jax trains data-parallel over every "
                   "device, torch on one")
    p.add_argument("--augment", type=_choice("--augment", AUGMENT), default="auto",
                   help="random horizontal flip and 4-pixel padded crop of image batches: auto (the model's recipe: "
                   "cifar10_vgg), on (any HxWxC images) or off")
    p.add_argument("--input-workers", type=_input_workers, default=None,
                   help="threads making batches ahead of the training step: auto (tf.data's autotuning on "
                   "tensorflow; on jax and torch the usable cores, at most 4) or N")
    p.add_argument("--steps-per-epoch", type=_positive_int("--steps-per-epoch"), default=None)
    p.add_argument("--dry-run", action="store_true",
                   help="synthetic data, 2 steps, save and reload the artifacts, print a summary")
    return p


def check_jit_compile(jit_compile: str, replicas: int, backend: str = "tensorflow") -> None:
    """XLA on with several replicas is refused on TensorFlow: Keras 3 cannot XLA-compile a MirroredStrategy step.
    On torch `on` is refused: the trainer does not use torch.compile. JAX always compiles with XLA (off: eager)."""
    if jit_compile == "on" and backend == "torch":
        raise TrainerError("invalid value for --jit-compile: received 'on' with --backend torch, but the trainer "
                           "does not run torch.compile (Keras's jit_compile on torch); use --jit-compile auto or off, "
                           "or --backend jax or tensorflow for XLA")
    if jit_compile == "on" and replicas >= 2 and backend == "tensorflow":
        raise TrainerError(f"invalid value for --jit-compile: received 'on' with {replicas} replicas, but Keras 3 "
                           "cannot XLA-compile a MirroredStrategy step (keras-team/keras#19005); use --jit-compile "
                           "auto or off with several devices, or --gpus 1")


def resolve_jit_compile(jit_compile: str, device_kind: str, replicas: int) -> str:
    """`auto` on one GPU is `on`: what plain Keras does there (its own auto turns XLA off under any tf.distribute
    strategy, the trainer's one-device strategy included). Elsewhere `auto` stays Keras's: off on CPUs and with
    several replicas."""
    return "on" if jit_compile == "auto" and device_kind == "GPU" and replicas == 1 else jit_compile


def resolve_job_dir(job_dir: str | None, env: Mapping[str, str], dry_run: bool) -> tuple[str, bool]:
    """The job dir from the flag, else from Vertex AI's AIP_MODEL_DIR (<base>/model/), else a temp dir for dry runs."""
    if job_dir:
        return job_dir, False
    model_dir = env.get("AIP_MODEL_DIR")
    if model_dir:
        base = model_dir.rstrip("/")
        return (base[: -len("/model")] if base.endswith("/model") else base), False
    if dry_run:
        import tempfile

        return tempfile.mkdtemp(prefix="mlsubmit-dry-run-"), True
    raise TrainerError("missing --job-dir: pass --job-dir DIR (a local path or gs://bucket/prefix); "
                       "on Vertex AI the service's AIP_MODEL_DIR is used when the flag is absent")


def parse_config(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> TrainConfig:
    """Parse the command line strictly into a TrainConfig."""
    env = os.environ if env is None else env
    args = build_parser().parse_strict(sys.argv[1:] if argv is None else argv)
    backend = resolve_backend(args.backend, env)
    job_dir, temporary = resolve_job_dir(args.job_dir, env, args.dry_run)
    if not args.emulate_devices:  # mlsubmit train --local offers the GPUs this machine lacks this way
        from mlsubmit_runtime.devices import emulated_devices

        args.emulate_devices = emulated_devices(env)
    config = TrainConfig(
        job_dir=job_dir, model=args.model, data=args.data, epochs=args.epochs, batch_size=args.batch_size,
        learning_rate=args.learning_rate, optimizer=args.optimizer, validation_split=args.validation_split,
        patience=args.patience, gpus=args.gpus, emulate_devices=args.emulate_devices, seed=args.seed,
        precision=args.precision, jit_compile=args.jit_compile, steps_per_epoch=args.steps_per_epoch,
        dry_run=args.dry_run,
        checkpoint_dir=env.get("AIP_CHECKPOINT_DIR") or None,
        tensorboard_dir=env.get("AIP_TENSORBOARD_LOG_DIR") or None, job_dir_is_temporary=temporary,
        backend=backend, augment=args.augment, input_workers=args.input_workers,
    )
    known = config.gpu_count if config.gpu_count is not None else config.emulate_devices  # else: after device setup
    check_jit_compile(config.jit_compile, known or 0, config.backend)
    if config.dry_run:
        from dataclasses import replace

        config = replace(config, data=config.data if config.data.startswith("synthetic") else "synthetic",
                         epochs=1, steps_per_epoch=2)
    return config
