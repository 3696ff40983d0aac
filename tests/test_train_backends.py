"""`mlsubmit train --backends tensorflow,jax,torch`: the backend table and flag, the per-backend cloud bodies
(schema-checked, idempotent), bad input refused before anything starts, and a real `--local` run of all three
backends with a tiny Keras 3 trainer (tests/fixtures/trainers/keras3_backends) in which one backend fails."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

pytest_plugins = ["support.training_emulator", "support.submit_cli"]

from mlsubmit.errors import UsageError
from mlsubmit.images import carried

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "trainers" / "keras3_backends" / "trainer"
BUCKET = "gs://bkt-backends"


# -- the table and the flag ---------------------------------------------------------------------------------------
def test_backends_flag_splits_repeats_dedupes_and_lowercases():
    from mlsubmit.jobspec.keras_backends import parse_backends

    assert parse_backends(["jax,TORCH", "jax", "tensorflow"]) == ("jax", "torch", "tensorflow")
    assert parse_backends(["torch"]) == ("torch",)


@pytest.mark.parametrize("given, shown", [(["jax,pytorch"], "'pytorch'"), (["jax,,torch"], "'jax,,torch'")])
def test_an_unknown_or_empty_backend_name_lists_the_known_ones(given, shown):
    from mlsubmit.jobspec.keras_backends import parse_backends

    with pytest.raises(UsageError) as raised:
        parse_backends(given)
    line = raised.value.one_line()
    assert shown in line and "tensorflow, jax, torch" in line and "\n" not in line


def test_cloud_requirements_follow_the_pool_kind_and_tensorflow_needs_none():
    from mlsubmit.jobspec.keras_backends import BACKENDS, requirements

    assert requirements("jax", "gpu") == ("jax[cuda12]",) and requirements("jax", "cpu") == ("jax",)
    assert requirements("torch", "gpu") == ("torch",)
    assert all(requirements("tensorflow", kind) == () for kind in ("cpu", "gpu", "tpu"))
    assert BACKENDS["jax"].install == "pip install 'mlsubmit[jax]'"
    assert "DataParallel" in BACKENDS["jax"].data_parallel
    assert "MirroredStrategy" in BACKENDS["tensorflow"].data_parallel


def test_backend_sdist_is_requirements_only_and_reproducible(tmp_path):
    from mlsubmit.packaging import write_sdist
    from mlsubmit.packaging.backend_dist import planned_backend

    gpu, cpu = planned_backend("jax", "gpu", BUCKET), planned_backend("jax", "cpu", BUCKET)
    assert planned_backend("tensorflow", "gpu", BUCKET) is None
    assert gpu.sha256 != cpu.sha256 and gpu.uri.endswith("/mlsubmit_keras_jax-1.0.tar.gz")
    assert planned_backend("jax", "gpu", BUCKET).sha256 == gpu.sha256  # the same bytes every time
    sdist = write_sdist(gpu.plan, tmp_path)
    assert (sdist.sha256, sdist.size) == (gpu.sha256, gpu.size)
    with tarfile.open(sdist.path) as tar:
        assert sorted(m.name.split("/", 1)[1] for m in tar.getmembers()) == ["PKG-INFO", "pyproject.toml", "setup.py"]
        info = tar.extractfile("mlsubmit_keras_jax-1.0/PKG-INFO").read().decode()
    assert "Name: mlsubmit-keras-jax" in info and "Requires-Dist: jax[cuda12]" in info


def test_parallel_slots_use_half_the_cores_and_at_least_one():
    from mlsubmit.local.backend_runs import parallel_slots

    assert [parallel_slots(n) for n in (1, 2, 3, 8)] == [1, 1, 1, 4]


def test_table_reads_any_trainers_metric_names_and_says_why_a_backend_failed():
    from mlsubmit.commands._backends_train import backend_table
    from mlsubmit.local.backend_runs import BackendResult

    rows = backend_table([
        BackendResult("tensorflow", "j_tensorflow", "/x", "SUCCEEDED", 12.34,
                      metrics={"test_accuracy": 0.91234, "test_loss": 0.3, "samples_per_second": 1234.56}),
        BackendResult("jax", "j_jax", "/y", "SUCCEEDED", 3.0, metrics={"val_accuracy": 0.5}),
        BackendResult("torch", "j_torch", "/z", "FAILED", 2.0, "chief-0: RuntimeError: boom"),
    ])
    assert rows[0].split() == ["backend", "state", "accuracy", "loss", "samples/s", "wall", "time"]
    assert rows[1].split() == ["tensorflow", "SUCCEEDED", "0.9123", "0.3000", "1234.6", "12.3", "s"]
    assert rows[2].split() == ["jax", "SUCCEEDED", "0.5000", "—", "—", "3.0", "s"]
    assert rows[3].split()[:6] == ["torch", "FAILED", "—", "—", "—", "2.0"]
    assert rows[3].endswith("chief-0: RuntimeError: boom")


# -- cloud bodies -------------------------------------------------------------------------------------------------
def _submission(api: str = "vertex", **flags):
    from mlsubmit.cloud.settings import Settings
    from mlsubmit.cloud.submit import prepare
    from mlsubmit.commands._spec_options import spec_from_options

    spec, _ = spec_from_options({"region": "us-central1", **flags}, target="cloud")
    settings = Settings(project="p1", region="us-central1", staging_bucket=BUCKET)
    return prepare(spec, api=api, settings=settings, package_path=str(FIXTURE))


def test_three_backends_make_three_schema_valid_bodies_with_their_env_packages_and_own_request_ids():
    from mlsubmit.cloud.backend_jobs import for_backend
    from mlsubmit.jobspec import discovery

    flags = {"gpus": "1", "workers": "1", "worker_machine_type": "n1-standard-4", "env": ["A=1"],
             "trainer_args": ["--epochs", "2"]}
    first = _submission(**flags)
    jobs = [for_backend(first, name) for name in ("tensorflow", "jax", "torch")]
    trainer = first.package.uri
    for job in jobs:
        assert discovery.validate("aiplatform.v1", "GoogleCloudAiplatformV1CustomJob", job.body) == []
        assert job.body["displayName"] == f"{first.body['displayName']}_{job.keras_backend}"
        assert job.body["labels"]["mlsubmit_request_id"] == job.request_id
        assert job.body["jobSpec"]["baseOutputDirectory"]["outputUriPrefix"] == \
            f"{first.spec.job_dir}/{job.keras_backend}"
        for pool in job.body["jobSpec"]["workerPoolSpecs"]:
            package = carried.program(pool)
            assert package["env"] == [{"name": "A", "value": "1"}, {"name": "KERAS_BACKEND",
                                                                    "value": job.keras_backend}]
            assert package["args"] == ["--epochs", "2"]  # exactly the user's
            assert package["packageUris"][-1] == trainer
    tf_job, jax_job, torch_job = jobs
    assert [len(carried.program(p)["packageUris"]) for p in tf_job.body["jobSpec"]["workerPoolSpecs"]] == [1, 1]
    gpu_pool, cpu_pool = (carried.program(p)["packageUris"] for p in jax_job.body["jobSpec"]["workerPoolSpecs"])
    by_uri = {dry.uri: dry.plan.metadata.requires for dry in jax_job.backend_packages}
    assert by_uri[gpu_pool[0]] == ("jax[cuda12]",) and by_uri[cpu_pool[0]] == ("jax",)
    assert [p.plan.metadata.requires for p in torch_job.backend_packages] == [("torch",)]
    assert len({job.request_id for job in jobs} | {first.request_id}) == 4

    again = _submission(**flags)  # a re-run: another generated job name, the same jobs to find
    assert again.body["displayName"] != first.body["displayName"]
    assert [for_backend(again, job.keras_backend).request_id for job in jobs] == [job.request_id for job in jobs]


def test_legacy_api_takes_tensorflow_only_and_names_vertex_for_the_others():
    from mlsubmit.cloud.backend_jobs import for_backend

    legacy = _submission("legacy", job_name="bk_job", job_dir=f"{BUCKET}/out")
    job = for_backend(legacy, "tensorflow")
    assert job.body["jobId"] == "bk_job_tensorflow"
    assert job.body["trainingInput"]["jobDir"] == f"{BUCKET}/out/tensorflow"
    with pytest.raises(UsageError) as raised:
        for_backend(legacy, "jax")
    assert "--api vertex" in raised.value.one_line()


def test_keras_backend_in_env_is_refused_with_backends():
    from mlsubmit.cloud.backend_jobs import for_backend

    with pytest.raises(UsageError) as raised:
        for_backend(_submission(env=["KERAS_BACKEND=jax"]), "torch")
    assert "--env KERAS_BACKEND" in raised.value.one_line()


def _mlsubmit(*args: str, cwd: Path, home: Path, prelude: str = "", timeout: float = 240) \
        -> subprocess.CompletedProcess:
    code = f"{prelude}\nimport runpy, sys\nsys.argv = ['mlsubmit', *sys.argv[1:]]\n" \
           "runpy.run_module('mlsubmit', run_name='__main__')"
    env = {**os.environ, "NO_COLOR": "1", "MLSUBMIT_HOME": str(home), "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_cloud_dry_run_shows_every_backends_body_and_package(tmp_path):
    done = _mlsubmit("train", "--backends", "jax,tensorflow", "--project", "p1", "--region", "us-central1",
                     "--staging-bucket", BUCKET, "--job-name", "bk", "--dry-run", "--package-path", str(FIXTURE),
                     cwd=tmp_path, home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    assert "# --backends jax: request id" in done.stdout and "# --backends tensorflow: request id" in done.stdout
    assert '"displayName": "bk_jax"' in done.stdout and '"value": "jax"' in done.stdout
    assert "backend package mlsubmit_keras_jax-1.0.tar.gz" in done.stdout and "requires jax" in done.stdout
    assert f"base output directories: {BUCKET}/jobs/bk/jax, {BUCKET}/jobs/bk/tensorflow" in done.stdout


# -- bad input: one line, exit 2, nothing started --------------------------------------------------------------------
# A finder that refuses `torch` stands in for an environment without it (find_spec then finds nothing usable).
_NO_TORCH = """
import sys
class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, NoTorch())
"""


@pytest.mark.parametrize("backends, prelude, expected", [
    ("tensorflow,caffe", "", "invalid value for --backends: received 'caffe'; expected one of tensorflow, jax, torch"),
    ("jax,torch", _NO_TORCH, "torch needs the torch package, which is not installed in mlsubmit's environment; "
                             "install it with pip install 'mlsubmit[torch]'"),
])
def test_bad_backends_are_one_line_exit_2_before_anything_is_built(tmp_path, backends, prelude, expected):
    done = _mlsubmit("train", "--local", "--backends", backends, "--package-path", str(FIXTURE), cwd=tmp_path,
                     home=tmp_path / "home", prelude=prelude, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and expected in done.stderr, done.stderr
    assert done.stdout == "" and not (tmp_path / "home").exists() and not (tmp_path / "jobs").exists()


def test_legacy_local_run_refuses_a_non_tensorflow_backend(tmp_path):
    done = _mlsubmit("train", "--local", "--api", "legacy", "--backends", "torch", "--package-path", str(FIXTURE),
                     cwd=tmp_path, home=tmp_path / "home", timeout=60)
    assert done.returncode == 2 and "--api vertex" in done.stderr and done.stderr.count("\n") == 1, done.stderr


# -- a real run of the three backends ----------------------------------------------------------------------------
@pytest.mark.slow
def test_local_run_of_three_backends_each_really_on_its_backend_one_failing_the_others_finish(tmp_path):
    done = _mlsubmit("train", "--local", "--backends", "tensorflow,jax", "--backend", "torch", "--job-name", "bk",
                     "--env", "KERAS3_FIXTURE_FAIL=torch", "--package-path", str(FIXTURE), "--", "--samples", "128",
                     cwd=tmp_path, home=tmp_path / "home")
    out = done.stdout
    assert done.returncode == 1, out[-3000:] + done.stderr[-2000:]
    parent = tmp_path / "jobs" / "bk"
    for name in ("tensorflow", "jax", "torch"):
        assert f"[{name}] job bk_{name}:" in out
    for name in ("tensorflow", "jax"):  # torch's job fails before it imports Keras (tests/test_backends_job.py
        assert f"[{name}] [chief-0] keras backend: {name}" in out  # trains on torch): what Keras really loaded
    for name in ("tensorflow", "jax"):
        metrics = json.loads((parent / name / "model" / "metrics.json").read_text())
        assert metrics["keras_backend"] == name
        row = next(line for line in out.splitlines() if line.startswith(f"{name} ") and "SUCCEEDED" in line)
        assert row.split()[2:5] == [f"{metrics['accuracy']:.4f}", f"{metrics['loss']:.4f}",
                                    f"{metrics['samples_per_second']:.1f}"]
    assert not (parent / "torch" / "model" / "metrics.json").exists()
    torch_row = next(line for line in out.splitlines() if line.startswith("torch ") and "FAILED" in line)
    assert torch_row.endswith("chief-0: RuntimeError: asked to fail under torch")
    assert "error: 1 of 3 backends' jobs did not succeed: torch FAILED" in done.stderr


_TIMED_TASK = """\
import os, sys, time

if __name__ == "__main__":
    out = os.environ["AIP_MODEL_DIR"]
    os.makedirs(out, exist_ok=True)
    started = time.time()
    time.sleep(float(sys.argv[1]))
    if os.environ["KERAS_BACKEND"] == "torch":
        sys.exit("no torch today")
    with open(os.path.join(out, "metrics.json"), "w") as handle:
        handle.write('{"started": %r, "ended": %r, "accuracy": 0.5}' % (started, time.time()))
"""


def test_a_pin_keeps_extras_and_markers_and_takes_the_resolved_version():
    from mlsubmit.jobspec.backend_pins import pin

    resolved = {"jax": "0.5.3", "torch": "2.14.1"}
    assert pin(["jax[cuda12]", "torch>=2; python_version >= '3.9'", "absent"], resolved) == (
        "jax[cuda12]==0.5.3", 'torch==2.14.1; python_version >= "3.9"', "absent")


@pytest.mark.slow
def test_jax_is_pinned_to_what_pip_resolves_beside_the_images_tensorflow(monkeypatch):
    """The TensorFlow 2.17 image (ml-dtypes < 0.5, numpy < 2): a plain `pip install jax` in the cloud would
    take the newest JAX (ml_dtypes >= 0.5, numpy >= 2); the pin is what pip's resolver chose with the image's pins
    as constraints (reaches the index once, then kept by its inputs)."""
    from packaging.version import Version

    from mlsubmit.commands._spec_options import spec_from_options
    from mlsubmit.jobspec.backend_pins import pins_on_image

    spec, _ = spec_from_options({"python_module": "trainer.task", "runtime_version": "2.17"}, target="cloud")
    said: list[str] = []
    pins = pins_on_image(spec, "jax", ["cpu"], ["tabulate>=0.8"], said.append)
    assert pins is not None, said
    (pinned,) = pins["cpu"]
    name, version = pinned.split("==")
    assert name == "jax" and Version(version) < Version("0.6"), pinned  # jax 0.6 on needs ml_dtypes >= 0.5
    assert said == [f"jax: pinned on tf-cpu.2-17.py310 (cpu pools) by pip's resolver with the image's packages: "
                    f"{pinned}"]
    again: list[str] = []
    assert pins_on_image(spec, "jax", ["cpu"], ["tabulate>=0.8"], again.append) == pins and again == said


def test_the_emulator_runs_a_jax_or_torch_job_in_mlsubmits_environment_even_with_image_environments_on(monkeypatch):
    """An image's environment carries its TensorFlow only: the emulator does not pip-install jax/torch into it."""
    from mlsubmit.commands._spec_options import spec_from_options
    from mlsubmit.emulator.image_prepare import image_python

    monkeypatch.setenv("MLSUBMIT_IMAGE_ENV", "1")
    said: list[str] = []
    for backend in ("jax", "torch"):
        spec, _ = spec_from_options({"python_module": "trainer.task", "env": [f"KERAS_BACKEND={backend}"]},
                                    target="local")
        assert image_python(spec, [], said.append) is None
    assert said == [f"KERAS_BACKEND={b}: the job runs in mlsubmit's own environment (an image's environment carries "
                    "its TensorFlow only)" for b in ("jax", "torch")]


def test_backends_run_side_by_side_when_allowed_and_one_failing_leaves_the_others(tmp_path, monkeypatch):
    """The parallel path (this 2-core machine runs them in turn by default): a trainer without Keras that sleeps."""
    from support.tiny_package import make_project

    from mlsubmit.commands._spec_options import spec_from_options
    from mlsubmit.local.backend_runs import run_backends

    package = make_project(tmp_path / "proj", task=_TIMED_TASK)
    monkeypatch.chdir(tmp_path)
    spec, _ = spec_from_options({"python_module": "tinypkg.task", "job_name": "side", "trainer_args": ["1.5"]},
                                target="local")
    lines: list[str] = []
    results = run_backends(spec, ("jax", "tensorflow", "torch"), api="vertex", package_path=str(package),
                           say=lines.append, parallel=3)
    assert [(r.backend, r.state) for r in results] == [("jax", "SUCCEEDED"), ("tensorflow", "SUCCEEDED"),
                                                       ("torch", "FAILED")]
    assert results[2].reason == "chief-0: no torch today" and not results[2].metrics
    jax, tf = results[0].metrics, results[1].metrics
    assert jax["started"] < tf["ended"] and tf["started"] < jax["ended"]  # they overlapped
    assert results[0].job_dir == str(tmp_path / "jobs" / "side" / "jax")
    assert "3 jobs under %s: 3 at a time" % (tmp_path / "jobs" / "side") in lines


# -- cloud jobs on the training-service emulator -----------------------------------------------------------------
@pytest.mark.slow
def test_cloud_jobs_per_backend_run_on_the_emulator_with_their_packages_and_a_rerun_makes_none(cloud):
    args = ("train", "--backends", "jax,torch", "--job-name", "bk", "--skip-preflight", "--package-path",
            str(FIXTURE), "--", "--samples", "64")
    run = cloud.run(*args)
    assert run.code == 0, run.stdout[-3000:] + run.stderr[-3000:]
    for name in ("jax", "torch"):
        assert f"keras backend: {name}" in run.stdout  # KERAS_BACKEND reached the replica; Keras loaded it
        assert f"warning: {name}: --skip-preflight: its packages go unpinned" in run.stderr
        # pinned for the cloud image; here the job runs on mlsubmit's own jax/torch, never a second one from the index
        assert re.search(rf"Not installing mlsubmit_keras_{name}-1.0.tar.gz \(the backend's packages for the cloud "
                         rf"image\): the job runs on {name} [\d.]+\S* of mlsubmit's environment", run.stdout + run.stderr)
        assert f"{name}: job " in run.stderr and "(uploaded, " in run.stderr
    jobs = {job["displayName"]: job for job in cloud.vertex_jobs()}
    assert set(jobs) == {"bk_jax", "bk_torch"}
    for name, job in ((n, jobs[f"bk_{n}"]) for n in ("jax", "torch")):
        assert job["state"] == "JOB_STATE_SUCCEEDED"
        package = carried.program(job["jobSpec"]["workerPoolSpecs"][0])
        assert [uri.rsplit("/", 1)[1] for uri in package["packageUris"]] == [
            f"mlsubmit_keras_{name}-1.0.tar.gz", "keras3_backends_trainer-0.1.tar.gz"]
        assert package["env"] == [{"name": "KERAS_BACKEND", "value": name}]
        assert cloud.object(package["packageUris"][0]) is not None  # staged where the job installed it from

    again = cloud.run(*args)
    assert again.code == 0, again.stderr[-3000:]
    assert again.stderr.count("this same submission already made job") == 2
    assert len(cloud.vertex_jobs()) == 2
