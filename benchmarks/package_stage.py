#!/usr/bin/env python3
"""Build and stage the bundled trainer: mlsubmit vs the path gcloud and the Vertex AI SDK take.

Baseline (what `gcloud ai-platform jobs submit training --package-path` and the Vertex AI SDK do on every
submission): `python setup.py sdist` in a subprocess, then an upload of the result with google-cloud-storage
under a fresh job prefix. Ours: `build_sdist` in-process + `stage` (content-addressed, create-only,
verified). Both run against a fake-gcs-server this script starts, on a copy of the trainer and setup.py.

    .venv/bin/python benchmarks/package_stage.py [--repeats 5]

Prints the median time of each, the ratio, the bytes sent when the unchanged package is staged again, whether
repeated builds give identical bytes, and (for information) what the offline install pre-flight costs.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mlsubmit.emulator.gcs_emulator import GcsEmulator, storage_client  # noqa: E402
from mlsubmit.packaging import build_sdist, preflight, stage  # noqa: E402


def timed(fn):
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


def baseline_once(project: Path, out: Path, bucket: str, job: str) -> tuple[Path, int]:
    """`python setup.py sdist` + upload under a fresh job prefix (the file is sent every time)."""
    subprocess.run([sys.executable, "setup.py", "-q", "sdist", "--dist-dir", str(out)], cwd=project, check=True,
                   capture_output=True)
    (sdist,) = out.glob("*.tar.gz")
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    blob = storage_client().bucket(bucket).blob(f"{job}/packages/{digest}/{sdist.name}")
    blob.upload_from_filename(str(sdist))
    return sdist, sdist.stat().st_size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true",
                        help="one repeat, no pre-flight: that the benchmark runs (the suite)")
    args = parser.parse_args()
    if args.quick:
        args.repeats = 1
    work = Path(tempfile.mkdtemp(prefix="bench-package-"))
    project = work / "project"
    shutil.copytree(ROOT / "trainer", project / "trainer", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copy(ROOT / "setup.py", project / "setup.py")
    with GcsEmulator() as emulator:
        os.environ.update(emulator.env())
        emulator.create_bucket("bench")
        storage_client()  # import google-cloud-storage once, outside the timings of both sides

        base_times, base_sent, base_hashes = [], [], set()
        for i in range(args.repeats):
            seconds, (path, sent) = timed(lambda: baseline_once(project, work / f"base{i}", "bench", f"job{i}"))
            base_times.append(seconds)
            base_sent.append(sent)
            base_hashes.add(hashlib.sha256(path.read_bytes()).hexdigest())
            if i + 1 < args.repeats:
                time.sleep(1.01)  # gcloud users submit seconds apart: gzip and tar record the build time

        ours_first, ours_again, ours_again_sent, ours_hashes = [], [], [], set()
        for i in range(args.repeats):
            def build_and_stage(prefix: str):
                sdist = build_sdist(project / "trainer", dist_dir=work / f"ours{i}")
                return sdist, stage(sdist, f"gs://bench/{prefix}")

            seconds, (sdist, staged) = timed(lambda: build_and_stage(f"ours-job{i}"))  # new prefix: uploads
            assert staged.uploaded
            ours_first.append(seconds)
            ours_hashes.add(sdist.sha256)
            seconds, (_, again) = timed(lambda: build_and_stage(f"ours-job{i}"))  # unchanged: nothing sent
            ours_again.append(seconds)
            ours_again_sent.append(again.bytes_sent)
        check_seconds = None if args.quick else timed(lambda: preflight(sdist))[0]  # a venv and an install

    base, first, again = (statistics.median(t) for t in (base_times, ours_first, ours_again))
    print(f"machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"{platform.system()} {platform.release()}; fake-gcs-server on 127.0.0.1; {args.repeats} repeats, medians")
    print(f"package: trainer/ ({len(sdist.files)} files in the sdist, {sdist.size:,} bytes)")
    print(f"{'':44}{'time':>10}{'bytes sent':>14}")
    print(f"{'baseline: setup.py sdist + upload':44}{base * 1000:>8.0f}ms{statistics.median(base_sent):>14,}")
    print(f"{'mlsubmit: build_sdist + stage (new prefix)':44}{first * 1000:>8.0f}ms{sdist.size:>14,}")
    print(f"{'mlsubmit: unchanged package, staged again':44}{again * 1000:>8.0f}ms"
          f"{max(ours_again_sent):>14,}")
    print(f"ratio baseline / mlsubmit: {base / first:.1f}x (first stage), {base / again:.1f}x (unchanged)")
    print(f"bytes sent staging an unchanged package again: baseline {statistics.median(base_sent):,}, "
          f"mlsubmit {max(ours_again_sent):,}")
    print(f"identical bytes across {args.repeats} builds: baseline {len(base_hashes) == 1}, "
          f"mlsubmit {len(ours_hashes) == 1}")
    print("(not in the ratio) mlsubmit's offline install pre-flight in a fresh venv: "
          + ("not timed (--quick)" if check_seconds is None else f"{check_seconds:.1f} s"))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
