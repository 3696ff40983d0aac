"""Heaviest test files first, so two xdist workers finish together.

`dev.py test` runs two workers, each taking whole files (`--dist loadfile`). xdist hands files out in collection
order (with `--no-loadscope-reorder`; its default orders by test count, which put the few-test, minute-long engine
files last and left one worker alone for minutes at the end). Handing out the longest files first is the
longest-processing-time rule, which keeps the two workers within about one small file of each other.

The weights are each file's seconds (setup + call + teardown, summed) from a measured run of the whole suite on a
2-core machine; a file missing from the table counts as light. Refresh them after a measured run:
`python3 tests/support/ordering.py report.xml` (a `--junitxml` report) prints a new table. The order is a pure
function of the collected items, so every worker collects the same order, as xdist requires.
"""

from __future__ import annotations

import sys
from pathlib import Path

SECONDS = {  # measured 2026-11-28: 1175 tests in 15 min 10 s on 2 workers (warm image environments)
    # (#41) files marked "alone" were re-measured on 2026-12-07 file by file, alone, before and after their cuts,
    # beside other helpers' work (load 1-20 on 2 cores): a figure is the quiet one where the machine was quiet
    # (load ~1), else the 2026-11-28 figure scaled by what the cut removed in those loaded runs
    "test_engine_spark.py": 138,  # alone: 154 s quiet before; the sync test lost its evaluator (one TF process)
    "test_trainer_training.py": 140,
    "test_benchmarks_training.py": 115,  # added after the measured run: its four scripts' quick modes, timed alone
    "test_kube_cluster.py": 125,
    "test_benchmarks.py": 95,  # alone, as the suite runs them: submit.py, package_stage.py 81 s -> 26 s (load 9-11)
    "test_engine_ray.py": 56,  # alone, quiet: 94 s -> 66 s (two tests to Dask's), then 10 s less teardown
    "test_engine_dask.py": 110,  # + the job-name test from test_cluster_hostile.py (29 s at load 8)
    "test_byo_trainers.py": 61,  # alone, quiet: 83 s -> 61 s
    "test_local_training.py": 75,
    "test_tuning_submit.py": 63,
    "test_image_env.py": 57,
    "test_cluster_hostile.py": 18,  # alone, load 7-9: 134 s -> 49 s (its own Dask cluster gone)
    "test_trainer_without_tensorflow.py": 48,
    "test_cost_preemption.py": 42,
    "test_engine_stock_nodes.py": 31,  # alone, loaded: the stock installs 184 s -> 75 s (3 of 5 versions)
    "test_train_backends.py": 42,
    "test_submit_train.py": 42,
    "test_backends_job.py": 40,
    "test_trainer_backends.py": 37,
    "test_predict_backends.py": 31,
    "test_images_trainers.py": 26,
    "test_kube_hostile.py": 26,
    "test_capacity.py": 24,
    "test_jobs_cli.py": 24,
    "test_quickstart.py": 24,
    "test_launcher.py": 23,
    "test_predict_ensemble.py": 21,
    "test_hostile_inputs.py": 20,
    "test_cache.py": 19,
    "test_packaging_preflight.py": 17,
    "test_jobs_follow.py": 14,
    "test_chatter.py": 13,
    "test_trainer_hostile.py": 13,
    "test_gpu_scaling.py": 12,
    "test_submit_idempotent.py": 12,
    "test_images_decision.py": 12,
    "test_runtime_package.py": 12,
    "test_local_runner.py": 11,
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
