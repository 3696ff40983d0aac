"""Heaviest test files first, so the xdist workers finish together.

`dev.py test` runs three workers on 2 cores, each taking whole files (`--dist loadfile`). xdist hands files out in
collection order (with `--no-loadscope-reorder`; its default orders by test count, which put the few-test,
minute-long engine files last and left one worker alone for minutes at the end). Handing out the longest files first
is the longest-processing-time rule, which keeps the workers within about one small file of each other.

The weights are each file's seconds (setup + call + teardown, summed) from a measured run of the whole suite on a
2-core machine; a file missing from the table counts as light. Refresh them after a measured run:
`python3 tests/support/ordering.py report.xml` (a `--junitxml` report) prints a new table. The order is a pure
function of the collected items, so every worker collects the same order, as xdist requires.
"""

from __future__ import annotations

import sys
from pathlib import Path

SECONDS = {  # measured 2026-12-07 12:44: 1387 tests from a fresh clone on 2 workers (image environments warm)
    "test_kube_cluster.py": 97,
    "test_benchmarks.py": 81,
    "test_engine_spark.py": 78,
    "test_install.py": 67,
    "test_trainer_training.py": 67,
    "test_image_env.py": 60,
    "test_benchmarks_training.py": 59,
    "test_engine_dask.py": 56,
    "test_local_training.py": 52,
    "test_byo_trainers.py": 52,
    "test_images_trainers.py": 45,
    "test_tuning_submit.py": 43,
    "test_backends_job.py": 43,
    "test_engine_ray.py": 41,
    "test_image_check.py": 37,
    "test_train_backends.py": 36,
    "test_trainer_without_tensorflow.py": 36,
    "test_submit_train.py": 35,
    "test_cost_preemption.py": 34,
    "test_launcher.py": 29,
    "test_runtime_package.py": 28,
    "test_engine_stock_nodes.py": 28,
    "test_predict_keras2.py": 27,
    "test_quickstart.py": 26,
    "test_container_command.py": 24,
    "test_predict_backends.py": 23,
    "test_jobs_cli.py": 21,
    "test_cache.py": 20,
    "test_capacity.py": 18,
    "test_packaging_preflight.py": 16,
    "test_trainer_backends.py": 16,
    "test_hostile_inputs.py": 15,
    "test_kube_hostile.py": 14,
    "test_predict_ensemble.py": 13,
    "test_gpu_scaling.py": 12,
    "test_jobs_follow.py": 12,
    "test_submit_idempotent.py": 11,
    "test_images_decision.py": 11,
}
LIGHT = 1.0


def weight(path: str) -> float:
    return SECONDS.get(Path(path).name, LIGHT)


def pytest_collection_modifyitems(session, config, items) -> None:
    first = {}
    for index, item in enumerate(items):
        first.setdefault(item.nodeid.split("::", 1)[0], index)
    # stable: a file's tests keep their order and stay together, so module fixtures still start once per file
    items.sort(key=lambda item: (-weight(item.nodeid.split("::", 1)[0]), first[item.nodeid.split("::", 1)[0]]))


def table(report: Path) -> dict[str, float]:
    """Seconds per test file from a pytest `--junitxml` report (each testcase's time covers its setup and
    teardown)."""
    import xml.etree.ElementTree as ET

    seconds: dict[str, float] = {}
    for case in ET.parse(report).iter("testcase"):
        module = next((part for part in case.get("classname", "").split(".") if part.startswith("test_")), "")
        name = module + ".py"
        seconds[name] = seconds.get(name, 0.0) + float(case.get("time", 0))
    return dict(sorted(seconds.items(), key=lambda entry: -entry[1]))


if __name__ == "__main__":
    for name, total in table(Path(sys.argv[1])).items():
        if total >= 10:
            print(f'    "{name}": {round(total)},')
