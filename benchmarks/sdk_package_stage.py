#!/usr/bin/env python3
"""`mlsubmit package --stage` beside the Vertex AI SDK's own packaging and staging, in one run.

The SDK (google-cloud-aiplatform, `pip install -e '.[bench]'`; not a dependency of mlsubmit) packages a training
script or directory with `_TrainingScriptPythonPackager(path, requirements=...).package_and_copy_to_gcs(...)`:
it writes a setup.py, runs `python setup.py sdist` in a subprocess and uploads the result under a timestamped name,
every time. mlsubmit's side is what `mlsubmit package --stage` runs (`mlsubmit.packaging.package`, in-process like
the SDK's call): the reproducible sdist, the pre-flight, and the content-addressed stage; an unchanged package is
not sent again. Both stage the bundled trainer (with setup.py's REQUIRED_PACKAGES) to a fake-gcs-server this script
starts; each side runs `--repeats` times and the medians are compared.

    .venv/bin/python benchmarks/sdk_package_stage.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.package_stage import timed  # noqa: E402
from mlsubmit.emulator.gcs_emulator import GcsEmulator, storage_client  # noqa: E402
from mlsubmit.packaging import package  # noqa: E402
from mlsubmit.packaging.setup_meta import read_setup_py  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="one repeat: that the benchmark runs")
    args = parser.parse_args()
    if args.quick:
        args.repeats = 1
    try:
        from google.auth.credentials import AnonymousCredentials
        from google.cloud.aiplatform.utils.source_utils import _TrainingScriptPythonPackager
    except ImportError:
        print("google-cloud-aiplatform is not installed: pip install -e '.[bench]'", file=sys.stderr)
        return 2
    import logging

    import google.cloud.aiplatform as aiplatform

    logging.getLogger("google.cloud.aiplatform").setLevel(logging.WARNING)  # its "copied to" lines

    work = Path(tempfile.mkdtemp(prefix="bench-sdk-package-"))
    project = work / "project"
    shutil.copytree(ROOT / "trainer", project / "trainer", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(ROOT / "setup.py", project / "setup.py")
    requirements = list(read_setup_py(project / "setup.py").requires)
    with GcsEmulator() as emulator:
        os.environ.update(emulator.env())
        emulator.create_bucket("bench")
        storage_client()  # import google-cloud-storage once, outside the timings of both sides
        sdk, ours, skip, again = [], [], [], []
        for i in range(args.repeats):
            packager = _TrainingScriptPythonPackager(str(project / "trainer"), requirements=requirements)
            seconds, uri = timed(lambda: packager.package_and_copy_to_gcs(
                f"gs://bench/sdk{i}", project="bench", credentials=AnonymousCredentials()))
            sdk.append(seconds)
            seconds, result = timed(lambda: package(project / "trainer", dist_dir=work / f"ours{i}",
                                                    stage_to=f"gs://bench/ours{i}"))
            assert result.staged.uploaded and result.preflight is not None
            ours.append(seconds)
            seconds, result = timed(lambda: package(project / "trainer", dist_dir=work / f"skip{i}", check=False,
                                                    stage_to=f"gs://bench/skip{i}"))
            skip.append(seconds)
            seconds, result = timed(lambda: package(project / "trainer", dist_dir=work / f"again{i}", check=False,
                                                    stage_to=f"gs://bench/skip{i}"))
            assert not result.staged.uploaded
            again.append(seconds)
    base = statistics.median(sdk)
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
          f"google-cloud-aiplatform {aiplatform.__version__}; fake-gcs-server on 127.0.0.1; {args.repeats} runs "
          "each, medians")
    print(f"SDK _TrainingScriptPythonPackager.package_and_copy_to_gcs: {base * 1000:8.0f} ms   (staged {uri})")
    for label, times in (("mlsubmit package --stage (with pre-flight)", ours),
                         ("mlsubmit package --stage --skip-preflight", skip),
                         ("mlsubmit package --stage, unchanged package", again)):
        median = statistics.median(times)
        print(f"{label:58}{median * 1000:8.0f} ms   {median / base:.2f}x the SDK's time")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
