"""Before anything is sent: `--dry-run` shows the request, the packages and the program with no credentials and
no network; bad input is one line with exit code 2 and nothing is uploaded or submitted."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from mlsubmit.images import carried

pytest_plugins = ["support.training_emulator", "support.submit_cli"]
CLOSED = "http://127.0.0.1:9"  # nothing listens on the discard port


def test_dry_run_needs_no_credentials_and_no_network(cloud):
    offline = {"MLSUBMIT_API_ENDPOINT": "", "STORAGE_EMULATOR_HOST": CLOSED,
               "GOOGLE_APPLICATION_CREDENTIALS": "/nonexistent/key.json"}
    run = cloud.run("train", "--gpus", "2", "--tier", "CUSTOM", "--workers", "1", "--job-name", "sweep_1",
                    "--env", "LOG_LEVEL=debug", "--dry-run", "--", "--epochs", "1", **offline)
    assert run.code == 0, run.stderr
    method, _, rest = run.stdout.partition("\n")
    assert method == f"POST https://us-central1-aiplatform.googleapis.com/v1/projects/{cloud.project}" \
                     "/locations/us-central1/customJobs"
    body = json.JSONDecoder().raw_decode(rest)[0]
    chief, worker = body["jobSpec"]["workerPoolSpecs"]
    assert chief["machineSpec"]["acceleratorCount"] == 2 and worker["replicaCount"] == "1"
    package = carried.program(chief)
    assert package["args"] == ["--epochs", "1"]  # exactly the user's: Vertex AI passes nothing else
    assert body["jobSpec"]["baseOutputDirectory"] == {"outputUriPrefix": f"gs://{cloud.bucket}/jobs/sweep_1"}
    assert package["env"] == [{"name": "LOG_LEVEL", "value": "debug"}] == carried.program(worker)["env"]
    runtime, trainer = package["packageUris"]  # the trainer requires mlsubmit-runtime: staged first, beside it
    assert runtime.startswith(f"gs://{cloud.bucket}/packages/") and runtime.endswith("/mlsubmit_runtime-0.1.0.tar.gz")
    assert trainer.endswith("/trainer-0.1.0.tar.gz")
    assert len(body["labels"]["mlsubmit_request_id"]) == 32
    assert "trainer/task.py" in run.stdout and "bytes compressed" in run.stdout
    assert "program: python -m trainer.task --epochs 1" in run.stdout and "strategy:" not in run.stdout
    assert cloud.objects() == [] and cloud.vertex_jobs() == []


def test_dry_run_for_legacy_prints_the_ml_v1_job(cloud):
    run = cloud.run("train", "--api", "legacy", "--tier", "BASIC", "--dry-run")
    assert run.code == 0, run.stderr
    body = json.JSONDecoder().raw_decode(run.stdout.partition("\n")[2])[0]
    assert body["jobId"].startswith("trainer_") and body["trainingInput"]["scaleTier"] == "BASIC"
    assert "jobDir" not in body["trainingInput"] and "args" not in body["trainingInput"]  # nothing injected
    assert "job dir: none (legacy AI Platform passes --job-dir only when you give one)" in run.stdout


@pytest.mark.parametrize("args, env, says", [
    (("--api", "legacy", "--job-name", "my-job"), {}, "invalid value for --job-name: received 'my-job'"),
    (("--job-dir", "/tmp/out"), {}, "invalid value for --job-dir: received '/tmp/out'"),
    (("--gpus", "3", "--machine-type", "n1-standard-4"), {}, "cannot carry 3 NVIDIA_TESLA_T4"),
    ((), {"MLSUBMIT_PROJECT": ""}, "no project set for the cloud job; pass --project PROJECT"),
    (("--gpus", "3", "--machine-type", "n1-standard-4"), {"MLSUBMIT_PROJECT": ""}, "cannot carry 3"),  # spec first
    ((), {"MLSUBMIT_REGION": ""}, "no region set for the cloud job; pass --region REGION"),
    ((), {"MLSUBMIT_STAGING_BUCKET": ""}, "no staging bucket set for the cloud job; pass --staging-bucket"),
    (("--staging-bucket", "s3://elsewhere"), {}, "invalid value for --staging-bucket"),
    (("--wait", "--async"), {}, "received --wait and --async; expected at most one"),
    (("--package-path", "no-such-dir"), {}, "no-such-dir"),
    (("--local", "--dry-run"), {}, "invalid options for --local: --dry-run apply to cloud jobs only"),
    (("--env", "LOG_LEVEL"), {}, "invalid value for --env: received 'LOG_LEVEL'; expected KEY=VALUE"),
    (("--env", "1X=2"), {}, "invalid value for --env: received '1X=2'"),
    (("--api", "legacy", "--env", "A=1"), {}, "a legacy job sets no environment variables"),
])
def test_bad_input_is_one_line_exit_2_and_nothing_is_sent(cloud, args, env, says):
    run = cloud.run("train", *args, "--", "--dry-run", **env)
    assert run.code == 2, (run.stdout, run.stderr)
    assert says in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1, run.stderr
    assert cloud.objects() == [] and cloud.vertex_jobs() == [] and cloud.legacy_jobs() == []


def test_an_unknown_job_id_is_exit_2(cloud):
    run = cloud.run("jobs", "describe", "1234567890123456789")
    assert run.code == 2
    assert f"no Vertex AI custom job '1234567890123456789' in projects/{cloud.project}/locations/us-central1" \
        in run.stderr
    run = cloud.run("jobs", "describe", "nope", "--api", "legacy")
    assert run.code == 2 and "no AI Platform job 'nope'" in run.stderr


def test_an_unreachable_endpoint_is_exit_2_quickly(cloud, task_project):
    run = cloud.run("train", "--package-path", task_project, "--python-module", "tinypkg.task", "--skip-preflight",
                    "--endpoint", CLOSED, MLSUBMIT_RETRY_DEADLINE="1")
    assert run.code == 2, run.stderr
    assert f"no answer from {CLOSED}" in run.stderr


class _Refusing(BaseHTTPRequestHandler):
    """Answers every request as Google's front end answers a caller without the permission (or the API)."""

    status = "PERMISSION_DENIED"

    def do_GET(self) -> None:
        message = "Permission 'aiplatform.customJobs.list' denied on resource (or it may not exist)." \
            if self.status == "PERMISSION_DENIED" else \
            "Vertex AI API has not been used in project 42 before or it is disabled."
        data = json.dumps({"error": {"code": 403, "message": message, "status": self.status}}).encode()
        self.send_response(403)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


@pytest.mark.parametrize("status, says", [
    ("PERMISSION_DENIED", "permission aiplatform.customJobs.list denied on projects/{project}/locations/us-central1 "
                          "(403): Permission 'aiplatform.customJobs.list' denied on resource (or it may not exist); "
                          "grant the account a role that has it, such as roles/aiplatform.user"),
    ("SERVICE_DISABLED", "the API aiplatform.googleapis.com is not enabled for the project"),
])
def test_a_403_names_the_permission_or_the_api_to_enable(cloud, status, says):
    handler = type("Handler", (_Refusing,), {"status": status})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        run = cloud.run("jobs", "list", "--endpoint", f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
        server.server_close()
    assert run.code == 2
    assert says.format(project=cloud.project) in run.stderr
