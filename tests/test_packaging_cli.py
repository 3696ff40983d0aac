"""`mlsubmit package` as a user runs it: output, warnings, exit codes, nothing half-done."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.fault_proxy import FaultProxy, is_upload
from support.tiny_package import FAKE_SERVICE_ACCOUNT, make_project, write
from typer.testing import CliRunner

from mlsubmit.cli import app


def run(*args: str):
    return CliRunner().invoke(app, ["package", *args])


@pytest.fixture
def project(tmp_path) -> Path:
    package = make_project(tmp_path / "proj")
    write(package / "service-account.json", FAKE_SERVICE_ACCOUNT)
    write(package / ".env", "SECRET=1\n")
    return package


def test_dry_run_lists_files_and_size_and_writes_nothing(project, tmp_path):
    result = run("--package-path", str(project), "--dry-run", "--stage", "gs://my-bucket/jobs")
    assert result.exit_code == 0, result.output
    assert "tinypkg/task.py" in result.stdout and "setup.py  (generated)" in result.stdout
    assert "would hold 9 files" in result.stdout and "nothing written (--dry-run)" in result.stdout
    assert "would stage to gs://my-bucket/jobs/packages/" in result.stdout
    assert "warning: left out tinypkg/.env: environment file" in result.stderr
    assert "warning: left out tinypkg/service-account.json: Google service-account key" in result.stderr
    assert sorted(p.name for p in project.parent.iterdir()) == ["setup.py", "tinypkg"]  # no dist/, no egg-info

    listed = json.loads(run("--package-path", str(project), "--dry-run", "--output", "json").stdout)
    assert listed["total_size"] == sum(f["size"] for f in listed["files"])
    assert {e["path"] for e in listed["excluded_secrets"]} == {"tinypkg/.env", "tinypkg/service-account.json"}
    built = json.loads(run("--package-path", str(project), "--skip-preflight", "--dist-dir", str(tmp_path / "d"),
                           "--output", "json").stdout)
    assert built["sha256"] == listed["sha256"] and built["size"] == listed["size"]  # the dry run told the truth


def test_package_and_stage_then_an_unchanged_package_sends_nothing(gcs, project, tmp_path):
    _, bucket = gcs
    args = ["--package-path", str(project), "--dist-dir", str(tmp_path / "dist"), "--skip-preflight",
            "--stage", f"gs://{bucket}/runs"]
    first = run(*args, "--output", "json")
    assert first.exit_code == 0, first.output
    report = json.loads(first.stdout)
    assert report["uri"] == f"gs://{bucket}/runs/packages/{report['sha256']}/tinypkg-1.2.0.tar.gz"
    assert (report["uploaded"], report["bytes_sent"]) == (True, report["size"])
    assert report["preflight"] == "skipped" and "tinypkg/task.py" in report["files"]
    assert Path(report["path"]).stat().st_size == report["size"]

    second = run(*args)
    assert second.exit_code == 0, second.output
    assert "preflight skipped (--skip-preflight)" in second.stdout
    assert f"sha256    {report['sha256']}" in second.stdout
    assert f"staged    {report['uri']} (already staged, 0 bytes sent)" in second.stdout


def test_full_run_preflights_then_stages_to_a_directory(project, tmp_path):
    result = run("--package-path", str(project), "--dist-dir", str(tmp_path / "dist"),
                 "--stage", str(tmp_path / "stage"))
    assert result.exit_code == 0, result.output
    assert ("preflight ok: installed in a fresh venv on mlsubmit's own environment (Python 3.11"
            in result.stdout), result.stdout
    assert "; tinypkg.task found; the package's" in result.stdout and "compiled by Python 3.11" in result.stdout and "; not run (" in result.stdout
    assert (tmp_path / "dist" / "tinypkg-1.2.0.tar.gz").exists()
    assert len(list((tmp_path / "stage" / "packages").glob("*/tinypkg-1.2.0.tar.gz"))) == 1
    assert "runtime" not in result.stdout and not list((tmp_path / "dist").glob("mlsubmit_runtime*"))
    again = run("--package-path", str(project), "--dist-dir", str(tmp_path / "dist"), "--stage",
                str(tmp_path / "stage"), "--output", "json")  # unchanged: its passed pre-flight is not repeated
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["preflight"]["cached"] is True
    task = project / "task.py"
    task.write_text(task.read_text() + "# changed\n")
    changed = run("--package-path", str(project), "--dist-dir", str(tmp_path / "dist"), "--output", "json")
    assert changed.exit_code == 0 and json.loads(changed.stdout)["preflight"]["cached"] is False


def test_a_package_using_the_runtime_gets_its_sdist_built_and_staged_beside_it(tmp_path):
    project = make_project(tmp_path / "proj", task="import mlsubmit_runtime\n")
    result = run("--package-path", str(project), "--skip-preflight", "--stage", str(tmp_path / "stage"))
    assert result.exit_code == 0, result.output
    assert (project.parent / "dist" / "mlsubmit_runtime-0.1.0.tar.gz").exists()
    (staged,) = (tmp_path / "stage" / "packages").glob("*/mlsubmit_runtime-0.1.0.tar.gz")
    assert f"the package uses mlsubmit_runtime, staged {staged}" in result.stdout


def test_a_package_that_does_not_install_fails_before_anything_is_written(tmp_path):
    project = make_project(tmp_path / "proj", python_requires=">=99")
    result = run("--package-path", str(project), "--stage", str(tmp_path / "stage"))
    assert result.exit_code == 2
    assert result.stderr.startswith("error: tinypkg-1.2.0.tar.gz does not install (pip exit code 1): ")
    assert "requires a different Python" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (project.parent / "dist").exists() and not (tmp_path / "stage").exists()


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    missing = run("--package-path", str(tmp_path / "nope"))
    assert missing.exit_code == 2
    assert missing.stderr.startswith("error: invalid value for --package-path: received ")
    assert len(missing.stderr.strip().splitlines()) == 1
    output = run("--output", "jsn")
    assert output.exit_code == 2 and "did you mean 'json'?" in output.stderr
    write(tmp_path / "proj" / "setup.py", "setup(name=NAME")
    write(tmp_path / "proj" / "pkg" / "__init__.py", "")
    unreadable = run("--package-path", str(tmp_path / "proj" / "pkg"), "--dry-run")
    assert unreadable.exit_code == 2 and "cannot read setup.py" in unreadable.stderr


def test_upload_errors_map_to_exit_codes(gcs, project, tmp_path, monkeypatch):
    emulator, bucket = gcs
    monkeypatch.setenv("MLSUBMIT_RETRY_DEADLINE", "0.5")
    monkeypatch.setenv("MLSUBMIT_RETRY_INITIAL_DELAY", "0.01")
    args = ["--package-path", str(project), "--dist-dir", str(tmp_path / "dist"), "--skip-preflight"]
    no_bucket = run(*args, "--stage", "gs://missing-bucket-xyz/p")
    assert no_bucket.exit_code == 2 and "bucket gs://missing-bucket-xyz does not exist" in no_bucket.stderr
    with FaultProxy(emulator.endpoint, then=503, when=is_upload) as proxy:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.endpoint)
        failed = run(*args, "--stage", f"gs://{bucket}/p")
    assert failed.exit_code == 1 and "failed after retrying" in failed.stderr


def test_packaging_modules_do_not_load_google_clients_or_tensorflow_at_import():
    code = ("import sys, mlsubmit.commands.package, mlsubmit.packaging, mlsubmit.cloud.storage\n"
            "print([m for m in sys.modules if m.startswith(('google.cloud', 'googleapiclient', 'tensorflow'))])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_retired_image_is_checked_with_a_warning_as_train_local_runs_it(tmp_path):
    # one answer on every path: `train --local` checks and runs a package on a retired image (with a warning), so
    # `package` checks it there too, saying that Vertex AI no longer serves the image
    project = make_project(tmp_path / "proj")
    image = "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-17.py310:latest"
    result = run("--package-path", str(project), "--skip-preflight", "--executor-image", image)
    assert result.exit_code == 0, result.output
    assert "checked   image tf-cpu.2-17.py310 (Python 3.10)" in result.stdout
    assert result.stderr.startswith("warning: tf-cpu.2-17.py310 is no longer served by Vertex AI: its end of "
                                    "availability was 2026-07-11"), result.stderr
