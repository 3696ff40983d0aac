"""Wall time from `mlsubmit train --local` to a user trainer's first line of output, for a package with one
requirement, first run and cached, beside `gcloud ai-platform local train` on the same package in the same run.

The package is tests/fixtures/trainers/requirements_only (no setup.py; `tabulate>=0.8` in requirements.txt,
which mlsubmit's environment lacks). mlsubmit builds its sdist, installs it into a job environment on the image's
with that requirement and runs it: first run, a copy of the package edited as a user would (one comment line) in a
fresh $MLSUBMIT_HOME, so its sdist and job environment are new (the environment holding `tabulate` is built the
first time only, then shared, as for a user); cached, the same package again. Image environments are shared by
every run ($MLSUBMIT_IMAGES, else one in the benchmark's temporary folder, built by an untimed first run). gcloud
installs nothing: it runs
`python -m trainer.task` from the package's parent directory with whatever `python` is first on PATH, so its
requirement must already be installed — here a `pip install --target` of tabulate on PYTHONPATH, made before
timing and not counted.

    python benchmarks/byo_trainer.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tests" / "fixtures" / "trainers" / "requirements_only" / "trainer"
FIRST_LINE = "trainer: training"  # the trainer's first print

sys.path.insert(0, str(Path(__file__).resolve().parent))
from local_startup import edited_copy, print_medians, seconds_to_first_step  # noqa: E402  (the same stopwatch)


def seconds_to_first_line(cmd: list[str], cwd: Path, env: dict) -> tuple[float, float]:
    """(seconds to the trainer's first line, seconds to the end) of one fresh process tree."""
    return seconds_to_first_step(cmd, cwd, env, first_line=lambda line: FIRST_LINE in line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true",
                        help="one repeat of gcloud and the edited package: that the benchmark runs")
    args = parser.parse_args()
    if args.quick:
        args.repeats = 1
    gcloud = shutil.which("gcloud")
    if gcloud is None:
        raise SystemExit("gcloud is not on PATH")
    work = Path(tempfile.mkdtemp(prefix="mlsubmit-bench-byo-"))
    target = work / "gcloud-site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--target", str(target), "tabulate>=0.8"],
                   check=True)
    env = {**os.environ, "NO_COLOR": "1", "PYTHONUNBUFFERED": "1",
           "MLSUBMIT_IMAGES": os.environ.get("MLSUBMIT_IMAGES") or str(work / "images")}
    gcloud_env = {**env, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
                  "PYTHONPATH": str(target), "CLOUDSDK_CONFIG": str(work / "gcloud-config"),
                  "CLOUDSDK_CORE_DISABLE_PROMPTS": "1"}

    def local(home: Path, job: str, package: Path = PACKAGE) -> tuple[list[str], dict]:
        cmd = [sys.executable, "-m", "mlsubmit", "train", "--local", "--package-path", str(package),
               "--job-dir", str(work / job), "--", "--num-steps", "3"]
        return cmd, {**env, "MLSUBMIT_HOME": str(home)}

    rows: dict[str, list[tuple[float, float]]] = {}
    if not args.quick:  # the image's environment, built (or found) before anything is timed
        cmd, warm_env = local(work / "warm-up", "warm-up")
        seconds_to_first_line(cmd, work, warm_env)
    for repeat in range(args.repeats):
        home = work / f"home-{repeat}"
        package = edited_copy(PACKAGE, work / f"edit-{repeat}", beside=("requirements.txt",))
        runs = [("gcloud ai-platform local train (installs nothing)",
                 [gcloud, "ai-platform", "local", "train", "--package-path", str(PACKAGE), "--module-name",
                  "trainer.task", "--job-dir", str(work / f"gcloud-{repeat}"), "--", "--num-steps", "3"],
                 gcloud_env),
                ("mlsubmit train --local, edited package (sdist, job env)", *local(home, f"cold-{repeat}", package)),
                ("mlsubmit train --local, cached venv", *local(home, f"warm-{repeat}", package))]
        if args.quick:  # one row beside its baseline: the fewest processes that show the harness works
            runs = runs[:2]
        for name, cmd, run_env in runs:
            rows.setdefault(name, []).append(seconds_to_first_line(cmd, work, run_env))
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
          f"median of {args.repeats} run(s); package: {PACKAGE.relative_to(ROOT)} (requirement: tabulate>=0.8)")
    print_medians(rows, "gcloud ai-platform local train (installs nothing)", "first line", digits=2)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
