"""Entry point on the training machine: `python -m trainer.task --job-dir DIR [...]`.

Thin on purpose: parse the flags strictly into a TrainConfig, run, print the summary. Bad input is one line on
stderr and exit code 2, before training starts.
"""

from __future__ import annotations

import os
import sys
import time


def main(argv: list[str] | None = None) -> int:
    started = time.perf_counter()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # before TensorFlow is imported anywhere
    from mlsubmit_runtime.errors import InputError  # the trainer's TrainerError and the runtime's own
    from trainer.errors import TrainerError

    temporary = None  # a dry run's own job dir (no --job-dir given): removed at the end, whatever happens
    import signal

    def stop(signum: int, frame: object) -> None:  # SIGTERM (a stopped job, a preemption): unwind, so every private
        raise SystemExit(128 + signum)  # temporary folder is removed and the backup stays as last pushed

    signal.signal(signal.SIGTERM, stop)
    try:
        from trainer.config import parse_config

        config = parse_config(argv)
        temporary = config.job_dir if config.job_dir_is_temporary else None
        from trainer.cluster import from_environment
        from trainer.strategy import uses_cluster_route

        cluster = from_environment(os.environ)
        from trainer.backends import activate, check_cluster

        clustered = uses_cluster_route(cluster)
        if clustered:
            check_cluster(config.backend, cluster.shape())
        activate(config.backend, config.emulate_devices, config.gpu_count)  # before Keras is first imported
        if clustered:
            if config.precision != "float32":
                raise TrainerError(f"invalid value for --precision: received {config.precision!r}, but cluster jobs "
                                   "train in float32; drop --precision, or train on one machine's GPUs")
            os.environ["TF_USE_LEGACY_KERAS"] = "1"  # Keras 3 cannot train on cluster strategies (see README)
        if config.backend != "tensorflow":  # TensorFlow's import (mlsubmit_runtime.chatter) pauses the collector too
            from mlsubmit_runtime.heap import import_frameworks

            import_frameworks(("keras", config.backend))  # under KERAS_BACKEND, with the collector paused
        if clustered:
            from trainer.cluster_train import run_in_cluster

            result = run_in_cluster(config, cluster, started)
        elif config.backend == "tensorflow":
            from trainer.train import run

            result = run(config, cluster, started)
        else:
            from trainer.backend_train import run_on_backend

            result = run_on_backend(config, cluster, started)
        if result is not None:
            from trainer.summary import render

            print(render(result), flush=True)
        return 0
    except InputError as err:
        print(f"error: {err}", file=sys.stderr, flush=True)
        return err.exit_code
    finally:
        if temporary is not None:
            import shutil

            shutil.rmtree(temporary, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
