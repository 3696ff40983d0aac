"""`mlsubmit config` as a user runs it: output, files, migration warnings, help from the table, light imports."""

from __future__ import annotations

import subprocess
import sys

import yaml
from typer.testing import CliRunner

from mlsubmit.jobspec import machines
from mlsubmit.cli import app

HEAVY = ("tensorflow", "keras", "googleapiclient", "google.cloud", "google.auth", "yaml.cyaml_", "pydantic",
         "urllib.request", "http.client", "ssl")  # the last three: ~30 ms and ~7 MB of start-up
PROBE = """
import runpy, sys
sys.argv = ["mlsubmit", *sys.argv[1:]]
try:
    runpy.run_module("mlsubmit", run_name="__main__")
except SystemExit as exit:
    code = exit.code
heavy = sorted(m for m in sys.modules if m.startswith({heavy!r}))
print("HEAVY:" + ",".join(heavy), file=sys.stderr)
sys.exit(code)
"""


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY), *args], capture_output=True, text=True)


def test_help_and_config_import_no_heavy_library():
    for args in (["--help"], ["config", "--tier", "CUSTOM", "--gpus", "4"], ["config", "--help"]):
        result = run(*args)
        assert result.returncode == 0, result.stderr
        assert result.stderr.strip().splitlines()[-1] == "HEAVY:", (args, result.stderr)


def test_subprocess_output_is_the_vertex_custom_job_spec():
    result = run("config", "--tier", "CUSTOM", "--gpus", "4", "--", "--epochs", "3")
    document = yaml.safe_load(result.stdout)
    assert document["workerPoolSpecs"][0]["machineSpec"] == {"machineType": "n1-standard-16",
                                                             "acceleratorType": "NVIDIA_TESLA_T4",
                                                             "acceleratorCount": 4}
    assert document["workerPoolSpecs"][0]["replicaCount"] == "1"
    container = document["workerPoolSpecs"][0]["containerSpec"]  # the package on the public TensorFlow image
    assert (container["imageUri"], container["args"]) == ("tensorflow/tensorflow:2.21.0-gpu", ["--epochs", "3"])
    assert "this file names no package: add --package-uris" in result.stderr  # its command has nothing to install


def test_invalid_spec_in_a_real_process_is_one_red_line_and_exit_2():
    result = run("config", "--tier", "CUSTOM", "--machine-type", "n1-standard-4", "--gpus", "3")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines()[0] == ("error: invalid chief accelerators: n1-standard-4 cannot carry 3 "
                                             "NVIDIA_TESLA_T4; allowed counts: 1, 2, 4")


def test_output_file_is_written_whole_and_replaced(tmp_path):
    target = tmp_path / "job.yaml"
    target.write_text("old")
    runner = CliRunner()
    printed = runner.invoke(app, ["config", "--tier", "STANDARD_1", "--format", "legacy"])
    written = runner.invoke(app, ["config", "--tier", "STANDARD_1", "--format", "legacy", "-o", str(target)])
    assert printed.exit_code == written.exit_code == 0
    assert written.stdout == "" and target.read_text() == printed.stdout
    assert [p.name for p in tmp_path.iterdir()] == ["job.yaml"]
    missing = runner.invoke(app, ["config", "-o", str(tmp_path / "no" / "job.yaml")])
    assert missing.exit_code == 2 and "a file in an existing folder" in missing.stderr


def test_migration_prints_the_document_and_warns_on_stderr(tmp_path):
    old = tmp_path / "old.yaml"
    old.write_text("trainingInput:\n  scaleTier: BASIC_GPU\n  region: us-central1\n  pythonModule: trainer.task\n"
                   "  scheduling: {maxWaitTime: 60s}\n")
    result = CliRunner().invoke(app, ["config", "--config", str(old), "--format", "vertex"])
    assert result.exit_code == 0
    assert yaml.safe_load(result.stdout)["workerPoolSpecs"][0]["machineSpec"] == {
        "machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 1}
    assert result.stderr.split("cost estimate (")[0].splitlines() == [  # then the estimate (#24)
        "warning: trainingInput.scheduling.maxWaitTime: has no place in a JobSpec; not mapped",
        "warning: chief: n1-standard-8 + 1 NVIDIA_TESLA_K80 becomes n1-standard-8 + 1 NVIDIA_TESLA_T4 on Vertex AI "
        "(NVIDIA_TESLA_K80 reached end of support on Vertex AI)",
        "warning: the package runs on tensorflow/tensorflow:2.21.0-gpu as a custom container that pip-installs it "
        "from /gcs/ (Vertex AI serves no prebuilt TensorFlow training image any more), but this file names no package: "
        "add --package-uris gs://…/PACKAGE.tar.gz (`mlsubmit package --stage` prints it; gcloud's "
        "--python-package-uris does not reach a container)"]
    assert result.stdout.startswith("# gcloud ai custom-jobs create --region us-central1 --display-name NAME "
                                    "--config FILE\n")
    back = CliRunner().invoke(app, ["config", "--config", str(old), "--format", "legacy", "--region", "us-east1"])
    assert yaml.safe_load(back.stdout)["trainingInput"] == {"scaleTier": "BASIC_GPU", "region": "us-east1",
                                                            "runtimeVersion": "2.11", "pythonVersion": "3.7",
                                                            "pythonModule": "trainer.task"}


def test_help_states_precedence_and_comes_from_the_table():
    text = " ".join(CliRunner().invoke(app, ["config", "--help"]).stdout.split())
    assert "flags override the YAML" in text and "every flag given here overrides its value" in text
    assert "|".join(machines.TIERS) in text
    compact = text.replace(" ", "")  # click may wrap inside a hyphenated name
    for name in (*machines.ACCELERATORS, *machines.REGIONS, *machines.TIERS, "complex_model_m_gpu", "n1-standard-16"):
        assert name in compact, name
    assert "config" in CliRunner().invoke(app, ["--help"]).stdout


def test_legacy_runtime_and_python_pairs_are_the_ones_ml_v1_offered():
    # ml.v1 pythonVersion (and gcloud --python-version): 3.7 from 1.15 on, 3.5 from 1.4 to 1.14, 2.7 up to 1.15
    runner = CliRunner()
    for runtime, python in (("1.0", "2.7"), ("1.3", "2.7"), ("1.4", "3.5"), ("1.14", "3.5"), ("1.15", "3.7"),
                            ("2.11", "3.7")):
        done = runner.invoke(app, ["config", "--format", "legacy", "--runtime-version", runtime])
        assert done.exit_code == 0, done.stderr
        training = yaml.safe_load(done.stdout)["trainingInput"]
        assert (training["runtimeVersion"], training["pythonVersion"]) == (runtime, python)
    never = runner.invoke(app, ["config", "--format", "legacy", "--runtime-version", "1.0", "--python-version", "3.5"])
    assert never.exit_code == 2 and never.stdout == "" and never.stderr == (
        "error: invalid value for --python-version: received '3.5'; legacy AI Platform ran runtime 1.0 with Python "
        "2.7; use --python-version 2.7\n")
    text = " ".join(runner.invoke(app, ["config", "--help"]).stdout.split())
    assert "2.7 with runtimes 1.0-1.15, 3.5 with runtimes 1.4-1.14, 3.7 with runtimes 1.15-2.11, 3.8 with runtime " \
           "2.12" in text and "2.11 (3.7 or 3.10)" in text


def test_legacy_output_says_the_service_shut_down():
    done = CliRunner().invoke(app, ["config", "--format", "legacy"])
    assert done.exit_code == 0
    assert "warning: legacy AI Platform Training shut down on 2025-01-31 (deprecated 2023-07-26): Google no longer " \
           "runs this file" in done.stderr
    assert "shut down" not in CliRunner().invoke(app, ["config", "--format", "vertex"]).stderr


def test_a_prebuilt_image_config_without_a_package_is_warned_as_the_service_refuses_it():
    image = "us-docker.pkg.dev/vertex-ai/training/sklearn-cpu.1-6:latest"
    bare = CliRunner().invoke(app, ["config", "--executor-image", image])
    assert bare.exit_code == 0 and "packageUris" not in bare.stdout
    assert ("warning: this file names no package, and Vertex AI refuses a pythonPackageSpec without one "
            "(pythonPackageSpec.packageUris: required field is missing)") in bare.stderr
    staged = CliRunner().invoke(app, ["config", "--executor-image", image, "--package-uris", "gs://bkt1/t-0.1.tar.gz"])
    assert staged.exit_code == 0 and "warning" not in staged.stderr
