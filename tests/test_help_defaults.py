"""What `--help` says an option defaults to is what the command does: every "(default: …)" in the help of `config`
and `train` is read from the commands themselves and checked against the document `config` writes, and `train`'s
--region (which has no default for a cloud job) against `train --dry-run`."""

from __future__ import annotations

import re

import pytest
import typer
import yaml
from typer.testing import CliRunner

from mlsubmit.cli import app


def _claims(command: str) -> dict[str, str]:
    """{option: the value its help says it defaults to} for every "(default: …)" in `command`'s options."""
    params = typer.main.get_command(app).commands[command].params
    return {param.opts[0]: found.group(1) for param in params
            for found in [re.search(r"\(default: ([^)]*)\)", getattr(param, "help", None) or "")] if found}


def _config(*args: str) -> tuple[str, dict]:
    result = CliRunner().invoke(app, ["config", *args], env={"NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    return result.stdout, yaml.safe_load(result.stdout)


def _pools(*args: str) -> list[dict]:
    return _config(*args)[1]["workerPoolSpecs"]


# option -> (the value the help must name, a check that `config` does what it says)
CHECKS = {
    "--gpu-type": ("NVIDIA_TESLA_T4", lambda: _pools("--gpus", "1")[0]["machineSpec"]["acceleratorType"]
                   == "NVIDIA_TESLA_T4"),
    "--ps-machine-type": ("n1-standard-4", lambda: _pools("--machine-type", "n1-standard-8", "--ps", "1")[2]
                          ["machineSpec"]["machineType"] == "n1-standard-4"),
    "--region": ("us-central1", lambda: "--region us-central1 " in _config()[0].splitlines()[0]),
    "--runtime-version": ("legacy 2.11; Vertex AI 2.21 on the public tensorflow/tensorflow image",
                          lambda: _config("--format", "legacy")[1]["trainingInput"]["runtimeVersion"] == "2.11"
                          and _pools()[0]["containerSpec"]["imageUri"] == "tensorflow/tensorflow:2.21.0"),
    "--python-module": ("trainer.task", lambda: _config("--format", "legacy")[1]["trainingInput"]["pythonModule"]
                        == "trainer.task"),
    "--max-runtime": ("the service's, 7 days", lambda: "scheduling" not in _config()[1]),
    "--max-wait-duration": ("the service's 24 hours", lambda: _config("--machine-type", "g2-standard-8",
                                                                      "--flex-start")[1]["scheduling"]
                            == {"strategy": "FLEX_START"}),
}
NOT_A_VALUE = {"--start-port"}  # "(default: free ports)": whichever ports the system gives, nothing to compare


@pytest.mark.parametrize("option", sorted(CHECKS))
def test_each_default_config_help_names_is_what_config_writes(option):
    said, check = CHECKS[option]
    assert _claims("config")[option].startswith(said)
    assert check()


def test_every_default_the_help_names_is_checked_here():
    named = set(_claims("config")) | set(_claims("train"))
    assert named - NOT_A_VALUE <= set(CHECKS), named - NOT_A_VALUE - set(CHECKS)
    shared = set(_claims("train")) - NOT_A_VALUE  # the job-spec options, defined once for both commands
    assert {option: _claims("train")[option] for option in shared} == \
        {option: _claims("config")[option] for option in shared}


def test_train_help_gives_a_cloud_job_no_region_and_train_refuses_one_without(tmp_path):
    params = typer.main.get_command(app).commands["train"].params
    (region,) = [param.help for param in params if param.opts[0] == "--region"]
    assert "(default:" not in region and "MLSUBMIT_REGION" in region and "refused without one" in region
    env = {"NO_COLOR": "1", "CLOUDSDK_CONFIG": str(tmp_path / "no-gcloud"), "MLSUBMIT_REGION": None,
           "CLOUDSDK_COMPUTE_REGION": None, "MLSUBMIT_HOME": str(tmp_path / "home")}
    args = ["train", "--dry-run", "--project", "p", "--staging-bucket", "gs://help-bucket"]
    refused = CliRunner().invoke(app, args, env=env)
    assert refused.exit_code == 2 and refused.stderr.splitlines() == [
        "error: no region set for the cloud job; pass --region REGION (e.g. us-central1), or export "
        "MLSUBMIT_REGION=REGION, or run `gcloud config set compute/region REGION`"]
    from mlsubmit.commands._spec_options import spec_from_options

    assert "--local and --target default to us-central1" in region
    assert spec_from_options({}, target="local")[0].region == "us-central1"
