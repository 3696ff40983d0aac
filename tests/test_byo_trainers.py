"""Users' own trainer packages (tests/fixtures/trainers/, one per layout and habit) through `mlsubmit package`,
`mlsubmit train --local`, the emulator via `mlsubmit train`, and the real gcloud CLI against the emulator.

Every process is real. One MLSUBMIT_HOME is shared by the whole module and by the emulator, so each layout's
venv (package + its requirement, `tabulate`, which mlsubmit's environment lacks) is built once, by
`train --local`, and the emulator's job reuses it.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from mlsubmit.errors import UsageError
from mlsubmit.packaging import plan_sdist
from mlsubmit.packaging.frontend import cause, normalise
from mlsubmit.packaging.requirements_txt import read_requirements_txt, split_requirements
from mlsubmit.images import carried

pytest_plugins = ["support.training_emulator", "support.submit_cli"]

ROOT = Path(__file__).resolve().parents[1]
TRAINERS = ROOT / "tests" / "fixtures" / "trainers"
# layout → (package directory, module, the build path the package output names, its declared requirements)
LAYOUTS = {
    "setup_reads_requirements": ("trainer", "pypa/build, mlsubmit's setuptools, backend "
                                 "setuptools.build_meta:__legacy__ (setup.py computes its metadata", ("tabulate",)),
    "requirements_only": ("trainer", "in-process reproducible build (no setup.py: one generated, as gcloud does, "
                          "with the requirements of requirements.txt, which gcloud's generated setup.py does not "
                          "read: tabulate>=0.8)", ("tabulate>=0.8",)),
    "pyproject_hatchling": ("trainer", "pypa/build, isolated, backend hatchling.build (pyproject.toml project",
                            ("tabulate",)),
    "pyproject_setuptools": ("trainer", "pypa/build, mlsubmit's setuptools, backend "
                             "setuptools.build_meta (pyproject.toml project", ("tabulate",)),
    "not_named_trainer": ("linear_model", "in-process reproducible build (metadata read from setup.py without "
                          "running it)", ("numpy", "tabulate")),
}


@pytest.fixture(autouse=True)
def _shared_home(emulator_home, monkeypatch):
    monkeypatch.setenv("MLSUBMIT_HOME", str(emulator_home))  # the emulator's: venvs and frontend builds reused
    monkeypatch.setenv("NO_COLOR", "1")


def mlsubmit(*args: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlsubmit", *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd or ROOT, env={**os.environ, **(env or {})})


def package_dir(layout: str) -> Path:
    return TRAINERS / layout / LAYOUTS[layout][0]


def module(layout: str) -> str:
    return f"{LAYOUTS[layout][0]}.task"


# -- which build each layout gets, and what it declares ------------------------------------------------------
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_each_layout_builds_by_the_path_its_files_call_for(layout):
    plan = plan_sdist(package_dir(layout))
    assert plan.build.startswith(LAYOUTS[layout][1]), plan.build
    assert plan.metadata.requires == LAYOUTS[layout][2]


def test_a_setup_py_shim_beside_a_pyproject_project_goes_to_its_backend(tmp_path):
    shutil.copytree(TRAINERS / "pyproject_setuptools", tmp_path / "shim", symlinks=False)
    (tmp_path / "shim" / "setup.py").write_text("from setuptools import setup\n\nsetup()\n")
    plan = plan_sdist(tmp_path / "shim" / "trainer")
    assert plan.build.startswith("pypa/build, mlsubmit's setuptools, backend setuptools.build_meta (pyproject.toml "
                                 "project with a setup.py shim")
    assert (plan.metadata.name, plan.metadata.requires) == ("setuptools-trainer", ("tabulate",))


def test_requirements_cannot_be_added_to_a_package_its_own_backend_builds():
    with pytest.raises(UsageError, match="--requirements cannot be added to .*pyproject.toml project"):
        plan_sdist(package_dir("pyproject_hatchling"), requirements=("six",))
    assert plan_sdist(package_dir("requirements_only"), requirements=("six",)).metadata.requires == \
        ("tabulate>=0.8", "six")


def test_frontend_sdists_are_normalised_to_reproducible_bytes(tmp_path):
    """setuptools stamps the build time into its sdists: two builds a second apart differ, normalised they do not."""
    archives = []
    for attempt, stamp in enumerate((1_700_000_000, 1_700_000_001)):
        path = tmp_path / f"x-{attempt}.tar.gz"
        with tarfile.open(path, "w:gz") as tar:
            for name, data in (("x-1.0/PKG-INFO", b"Name: x\n"), ("x-1.0/a.py", b"A = 1\n")):
                info = tarfile.TarInfo(name)
                info.size, info.mtime, info.uname = len(data), stamp, "builder"
                tar.addfile(info, io.BytesIO(data))
        archives.append(path)
    assert archives[0].read_bytes() != archives[1].read_bytes()
    first, second = (normalise(path, 315532800) for path in archives)
    assert first == second
    with tarfile.open(fileobj=io.BytesIO(first)) as tar:
        assert [(m.name, m.mtime, m.uname) for m in tar.getmembers()] == [
            ("x-1.0/PKG-INFO", 315532800, ""), ("x-1.0/a.py", 315532800, "")]
        assert tar.extractfile("x-1.0/a.py").read() == b"A = 1\n"  # contents untouched


def test_a_package_no_frontend_can_build_is_one_line_with_the_cause(tmp_path):
    project = tmp_path / "broken"
    (project / "trainer").mkdir(parents=True)
    (project / "trainer" / "__init__.py").write_text("")
    (project / "setup.py").write_text("import setuptools\nraise RuntimeError('cannot find the version')\n"
                                      "setuptools.setup(**{'name': 'x'})\n")
    done = mlsubmit("package", "--package-path", str(project / "trainer"), "--dist-dir", str(tmp_path / "dist"))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "does not build with its backend" in done.stderr and "RuntimeError: cannot find the version" in done.stderr
    assert not (tmp_path / "dist").exists()


def test_requirements_files_and_flags_read_as_pip_does(tmp_path):
    (tmp_path / "base.txt").write_text("six>=1.16  # inline comment\n")
    (tmp_path / "requirements.txt").write_text("# comment\n\n-r base.txt\npandas[performance,excel]>=2\n")
    assert read_requirements_txt(tmp_path / "requirements.txt") == ("six>=1.16", "pandas[performance,excel]>=2")
    (tmp_path / "requirements.txt").write_text("--index-url https://example.com/simple\n")
    with pytest.raises(UsageError, match="line 1: '--index-url https://example.com/simple' is a pip option"):
        read_requirements_txt(tmp_path / "requirements.txt")
    assert split_requirements(["pandas,scipy>=1.3.0", "x[a,b]"]) == ("pandas", "scipy>=1.3.0", "x[a,b]")
    with pytest.raises(UsageError, match="--requirements"):
        split_requirements(["pandas,>=2"])


def test_the_frontend_message_is_shortened_to_its_cause():
    output = ("* Getting build dependencies for sdist...\nTraceback (most recent call last):\n  File \"setup.py\", "
              "line 3\nFileNotFoundError: [Errno 2] No such file or directory: 'VERSION'\n\nERROR Backend subprocess "
              "exited when trying to invoke get_requires_for_build_sdist\n")
    assert cause(output) == "FileNotFoundError: [Errno 2] No such file or directory: 'VERSION'"
    assert cause("ERROR Source /x does not appear to be a Python project\n") == \
        "Source /x does not appear to be a Python project"


# -- gcloud's vocabulary -----------------------------------------------------------------------------------------
def test_gcloud_flag_names_and_spellings_mean_the_same_as_ours():
    done = mlsubmit("config", "--scale-tier", "basic-gpu", "--module-name", "linear_model.task", "--labels",
                    "team=ml,stage=dev", "--label", "owner=me", "--format", "legacy")
    assert done.returncode == 0, done.stderr
    assert "scaleTier: BASIC_GPU" in done.stdout and "pythonModule: linear_model.task" in done.stdout
    assert "team: ml" in done.stdout and "stage: dev" in done.stdout and "owner: me" in done.stdout
    done = mlsubmit("config", "--scale-tier", "custom", "--master-machine-type", "n1-standard-8", "--worker-count",
                    "2", "--parameter-server-count", "1", "--python-version", "3.7", "--format", "legacy")
    assert done.returncode == 0, done.stderr
    assert "workerCount: '2'" in done.stdout and "parameterServerCount: '1'" in done.stdout
    assert "pythonVersion: '3.7'" in done.stdout  # gcloud's --python-version is the legacy pythonVersion


@pytest.mark.parametrize("flag, says", [
    ("--master-image-uri=gcr.io/p/image", "custom containers are not supported"),
    ("--use-chief-in-tf-config", "drop it: --api vertex says 'chief'"),
    ("--kms-key", "submit with gcloud ai custom-jobs create --kms-key"),
    ("--worker-pool-spec=machine-type=n1-standard-4", "use --machine-type, --gpus, --workers"),
])
def test_gcloud_flags_we_do_not_take_are_one_line_saying_what_to_use(flag, says, tmp_path):
    done = mlsubmit("train", "--local", flag, "x", "--job-dir", str(tmp_path / "job"))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and f"gcloud's {flag.split('=')[0]} is not supported" in done.stderr
    assert says in done.stderr
    assert not (tmp_path / "job").exists()


def test_a_requirement_that_cannot_be_resolved_stops_before_anything_is_staged(tmp_path):
    stage = tmp_path / "stage"
    done = mlsubmit("package", "--package-path", str(package_dir("requirements_only")), "--requirements",
                    "no-such-package-mlsubmit-test", "--stage", str(stage), "--dist-dir", str(tmp_path / "dist"))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "cannot be installed" in done.stderr and "no-such-package-mlsubmit-test" in done.stderr
    assert not stage.exists() and not (tmp_path / "dist").exists()


# -- each layout end to end --------------------------------------------------------------------------------------
def _weights(read, job_dir: str) -> dict:
    """The trainer's weights.json under the job dir: at its top when the trainer got `--job-dir` (legacy AI
    Platform passes it), in `model/` when it got only AIP_MODEL_DIR (Vertex AI's way). Either way the trainer wrote
    where the service told it to."""
    for path in (f"{job_dir}/weights.json", f"{job_dir}/model/weights.json"):
        found = read(path)
        if found is not None:
            return json.loads(found)
    raise AssertionError(f"no weights.json in {job_dir} or {job_dir}/model")


def _local(path: str) -> bytes | None:
    return Path(path).read_bytes() if Path(path).is_file() else None


def _assert_trained(output: str, layout: str) -> None:
    assert "step 3/3 loss" in output, output
    if "tabulate" in LAYOUTS[layout][2]:
        assert "-----  ------  -----" in output, output  # tabulate's table: the requirement was installed


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_each_layout_runs_through_package_and_train_local(layout, tmp_path):
    packaged = mlsubmit("package", "--package-path", str(package_dir(layout)), "--dist-dir", str(tmp_path / "dist"),
                        "--skip-preflight", "--output", "json")
    assert packaged.returncode == 0, packaged.stderr
    sdist = json.loads(packaged.stdout)
    assert sdist["build"].startswith(LAYOUTS[layout][1])

    local = mlsubmit("train", "--local", "--package-path", str(package_dir(layout)), "--module-name", module(layout),
                     "--job-dir", str(tmp_path / "job"), "--", "--num-steps", "3")
    assert local.returncode == 0, local.stdout + local.stderr
    _assert_trained(local.stdout, layout)
    assert f"(sha256 {sdist['sha256'][:12]}…)" in local.stdout  # the same bytes `mlsubmit package` built
    assert _weights(_local, str(tmp_path / "job"))["loss"] < 2.0


def test_a_layouts_package_runs_in_the_emulator_as_it_ran_here(cloud):
    """The layouts differ only in how their sdist is built (their trainer code is the same file): once built, the
    emulator stages, installs and runs an sdist alike whatever built it, so one layout goes through it here, the
    one whose package is not named trainer and has two requirements. (The emulator also runs a setup.py reading
    requirements.txt, built by gcloud, and a hatchling package, in the gcloud tests below.)"""
    layout = "not_named_trainer"
    job_dir = f"gs://{cloud.bucket}/jobs/{layout}"
    remote = cloud.run("train", "--package-path", str(package_dir(layout)), "--module-name", module(layout),
                       "--job-dir", job_dir, "--skip-preflight", "--", "--num-steps", "3")
    assert remote.code == 0, remote.stdout + remote.stderr
    _assert_trained(remote.stdout + remote.stderr, layout)
    assert _weights(cloud.object, job_dir)["loss"] < 2.0


def test_a_strict_vertex_trainer_runs_unmodified(cloud, tmp_path):
    """Strict argparse with --output_dir and AIP_MODEL_DIR only: what Vertex AI passes is what it gets."""
    out = tmp_path / "model"
    done = mlsubmit("train", "--local", "--package-path", str(TRAINERS / "vertex_strict" / "trainer"), "--",
                    "--output_dir", str(out), "--steps", "3")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "step 3/3 loss" in done.stdout and (out / "weights.json").is_file()
    # through the emulator with no trainer arguments at all: the model goes to AIP_MODEL_DIR (<job dir>/model/)
    remote = cloud.run("train", "--package-path", str(TRAINERS / "vertex_strict" / "trainer"), "--job-name",
                       "strict_job", "--skip-preflight")
    assert remote.code == 0, remote.stdout + remote.stderr
    assert json.loads(cloud.object(f"gs://{cloud.bucket}/jobs/strict_job/model/weights.json"))["loss"] < 2.0


def test_a_module_that_is_not_in_the_package_is_refused_before_anything_is_sent(cloud, tmp_path):
    done = cloud.run("train", "--package-path", str(package_dir("not_named_trainer")), "--module-name",
                     "nothere.task", "--", "--num-steps", "1")
    assert done.code == 2
    assert done.stderr.strip().splitlines()[-1] == (
        "error: module 'nothere.task' is not in the package (it holds the package 'linear_model'); "
        "pass --module-name with one of its modules, e.g. linear_model.task")
    assert cloud.objects() == [] and cloud.vertex_jobs() == []
    # under the package's own name the sdist's file list decides, offline, even for a package already staged
    staged = cloud.run("package", "--package-path", str(package_dir("not_named_trainer")), "--skip-preflight",
                       "--dist-dir", str(tmp_path), "--stage", f"gs://{cloud.bucket}")
    assert staged.code == 0 and len(cloud.objects()) == 1, staged.stderr
    typo = cloud.run("train", "--package-path", str(package_dir("not_named_trainer")), "--module-name",
                     "linear_model.tsak")
    assert typo.code == 2 and "error: module 'linear_model.tsak' is not in the package" in typo.stderr
    assert len(cloud.objects()) == 1 and cloud.vertex_jobs() == []


def test_extra_packages_are_staged_beside_the_package_and_listed_before_it(cloud, tmp_path):
    wheel_like = tmp_path / "helpers-1.0.tar.gz"
    wheel_like.write_bytes(b"not inspected by a dry run")
    done = cloud.run("train", "--dry-run", "--package-path", str(package_dir("not_named_trainer")), "--module-name",
                     "linear_model.task", "--packages", f"{wheel_like},gs://{cloud.bucket}/deps/dep-2.0.whl",
                     "--requirements", "six")
    assert done.code == 0, done.stderr
    body = json.loads(done.stdout[done.stdout.index("{"):done.stdout.index("\npackage ")])
    uris = carried.program(body["jobSpec"]["workerPoolSpecs"][0])["packageUris"]
    # installed in this order: the trainer may require what they bring
    assert uris[2].endswith("/linear_model-2.0.0.tar.gz") and uris[1] == f"gs://{cloud.bucket}/deps/dep-2.0.whl"
    assert uris[0].startswith(f"gs://{cloud.bucket}/packages/") and uris[0].endswith("/helpers-1.0.tar.gz")
    assert cloud.objects() == []  # a dry run sends nothing


# -- the real gcloud CLI against the emulator --------------------------------------------------------------------
def _gcloud(cloud, tmp_path, *args: str) -> subprocess.CompletedProcess:
    endpoint = cloud.emulator.endpoint + "/"
    env = {**os.environ, "CLOUDSDK_API_ENDPOINT_OVERRIDES_AIPLATFORM": endpoint,
           "CLOUDSDK_API_ENDPOINT_OVERRIDES_ML": endpoint, "CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING": endpoint,
           "CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE": f"{cloud.gcs.endpoint}/storage/v1/",
           "CLOUDSDK_AUTH_DISABLE_CREDENTIALS": "true", "CLOUDSDK_CORE_PROJECT": cloud.project,
           "CLOUDSDK_CONFIG": str(tmp_path / "gcloud"), "CLOUDSDK_CORE_DISABLE_PROMPTS": "1"}
    return subprocess.run(["gcloud", *args], capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)


def _wait(get, timeout: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = get()
        if job["state"] in ("SUCCEEDED", "FAILED", "JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED"):
            return job
        time.sleep(0.3)
    raise AssertionError(f"the job did not end: {job}")


@pytest.mark.skipif(shutil.which("gcloud") is None, reason="gcloud is not installed")
def test_gcloud_legacy_submit_builds_and_runs_a_setup_py_that_reads_requirements_txt(cloud, tmp_path):
    job_dir = f"gs://{cloud.bucket}/jobs/gcloud-legacy"
    done = _gcloud(cloud, tmp_path, "ai-platform", "jobs", "submit", "training", "byo_legacy", "--package-path",
                   str(package_dir("setup_reads_requirements")), "--module-name", "trainer.task", "--staging-bucket",
                   f"gs://{cloud.bucket}", "--region", "us-central1", "--job-dir", job_dir, "--async", "--",
                   "--num-steps", "3")
    assert done.returncode == 0, done.stderr
    jobs = cloud.emulator.legacy_jobs()
    job = _wait(lambda: jobs.get(name=f"projects/{cloud.project}/jobs/byo_legacy").execute())
    assert job["state"] == "SUCCEEDED", job.get("errorMessage")
    assert json.loads(cloud.object(f"{job_dir}/weights.json"))["loss"] < 2.0


@pytest.mark.skipif(shutil.which("gcloud") is None, reason="gcloud is not installed")
def test_gcloud_vertex_create_runs_a_hatchling_package_mlsubmit_staged(cloud, tmp_path):
    staged = mlsubmit("package", "--package-path", str(package_dir("pyproject_hatchling")), "--skip-preflight",
                      "--dist-dir", str(tmp_path / "dist"), "--stage", f"gs://{cloud.bucket}/pkgs", "--output", "json",
                      env={"STORAGE_EMULATOR_HOST": cloud.gcs.endpoint})
    assert staged.returncode == 0, staged.stderr
    uri = json.loads(staged.stdout)["uri"]
    job_dir = f"gs://{cloud.bucket}/jobs/gcloud-vertex"
    done = _gcloud(cloud, tmp_path, "ai", "custom-jobs", "create", "--region", "us-central1", "--display-name",
                   "byo-vertex", "--python-package-uris", uri, "--worker-pool-spec",
                   "machine-type=n1-standard-4,replica-count=1,executor-image-uri=us-docker.pkg.dev/vertex-ai/"
                   "training/sklearn-cpu.1-6:latest,python-module=trainer.task",
                   f"--args=--job-dir={job_dir},--num-steps=3", "--format=value(name)")
    assert done.returncode == 0, done.stderr
    name = done.stdout.strip()
    jobs = cloud.emulator.vertex_jobs()
    job = _wait(lambda: jobs.get(name=name).execute())
    assert job["state"] == "JOB_STATE_SUCCEEDED", job
    assert json.loads(cloud.object(f"{job_dir}/weights.json"))["loss"] < 2.0


@pytest.mark.skipif(shutil.which("gcloud") is None, reason="gcloud is not installed")
def test_gcloud_creates_the_default_public_image_job_from_mlsubmit_config_and_it_runs_the_package(cloud, tmp_path):
    """#21: no TensorFlow prebuilt image is served, so `mlsubmit config` writes the package on the public
    tensorflow/tensorflow image as a custom container; the real gcloud takes that file as it is, and the job installs
    the staged package from /gcs/ and runs the module with the user's arguments."""
    staged = mlsubmit("package", "--package-path", str(package_dir("pyproject_hatchling")), "--skip-preflight",
                      "--dist-dir", str(tmp_path / "dist"), "--stage", f"gs://{cloud.bucket}/pkgs", "--output", "json",
                      env={"STORAGE_EMULATOR_HOST": cloud.gcs.endpoint})
    assert staged.returncode == 0, staged.stderr
    uri = json.loads(staged.stdout)["uri"]
    job_dir = f"gs://{cloud.bucket}/jobs/gcloud-carrier"
    config = mlsubmit("config", "--package-uris", uri, "-o", str(tmp_path / "job.yaml"), "--", "--job-dir", job_dir,
                      "--num-steps", "3")
    assert config.returncode == 0 and "warning" not in config.stderr, config.stderr
    done = _gcloud(cloud, tmp_path, "ai", "custom-jobs", "create", "--region", "us-central1", "--display-name",
                   "byo-carrier", "--config", str(tmp_path / "job.yaml"), "--format=value(name)")
    assert done.returncode == 0, done.stderr
    jobs = cloud.emulator.vertex_jobs()
    job = _wait(lambda: jobs.get(name=done.stdout.strip()).execute())
    assert job["state"] == "JOB_STATE_SUCCEEDED", job
    container = job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]
    assert container["imageUri"] == "tensorflow/tensorflow:2.21.0" and container["args"][-2:] == ["--num-steps", "3"]
    assert f"/gcs/{cloud.bucket}/pkgs/" in container["command"][2]
    assert json.loads(cloud.object(f"{job_dir}/weights.json"))["loss"] < 2.0
    other = _gcloud(cloud, tmp_path, "ai", "custom-jobs", "create", "--region", "us-central1", "--display-name",
                    "own-image", "--worker-pool-spec", "machine-type=n1-standard-4,container-image-uri=gcr.io/p/own:1")
    assert other.returncode != 0 and "Python packages only" in other.stderr  # other containers are not emulated


def test_each_replica_writes_into_its_own_working_directory(cloud, tmp_path):
    """#21 one disk per replica: chief and worker both create `model/1/weights.txt` exclusively after reading
    `--data` relative to the user's directory: locally each gets its own (the user's directory gets nothing), and in
    the emulator too."""
    package = TRAINERS / "same_relative_path" / "samepath"
    user = tmp_path / "user"
    (user / "inputs").mkdir(parents=True)
    (user / "inputs" / "rows.txt").write_text("1 2 3\n")
    before = sorted(p.relative_to(user) for p in user.rglob("*"))
    local = mlsubmit("train", "--local", "--workers", "1", "--package-path", str(package), "--module-name",
                     "samepath.task", "--job-name", "samepath_local", "--job-dir", str(tmp_path / "job"), "--",
                     "--data", "inputs/rows.txt", cwd=user)
    assert local.returncode == 0, local.stdout + local.stderr
    assert sorted(p.relative_to(user) for p in user.rglob("*")) == before  # nothing landed in the user's directory
    root = Path(os.environ["MLSUBMIT_HOME"]) / "replicas" / "samepath_local"
    assert f"each replica works in its own directory under {root}, a mirror of {user}" in local.stdout
    for name in ("chief-0", "worker-0"):
        assert f"[{name}]".ljust(10) + f" {name} saved 3 rows to {root / name}/model/1/weights.txt" in local.stdout
        assert (root / name / "model" / "1" / "weights.txt").read_text() == f"{name} 3\n"
    # the artifacts line claims nothing for the job dir the trainer did not write to, and says where it wrote
    assert (f"base output directory: {tmp_path / 'job'}/ — nothing was written there; the replicas wrote 2 file(s) by "
            f"relative paths into their own directories under {root}") in local.stdout

    remote = cloud.run("train", "--workers", "1", "--package-path", str(package), "--module-name", "samepath.task",
                       "--job-name", "samepath_emulated", "--skip-preflight", "--",
                       "--data", str(user / "inputs" / "rows.txt"))
    assert remote.code == 0, remote.stdout + remote.stderr
    said = remote.stdout + remote.stderr
    assert "chief-0 saved 3 rows" in said and "worker-0 saved 3 rows" in said
    assert f"artifacts: none in gs://{cloud.bucket}/jobs/samepath_emulated/ (the trainer wrote nothing there)" in said


def test_package_path_dot_on_a_project_root_points_at_its_package():
    done = mlsubmit("package", "--package-path", ".", "--dry-run", cwd=TRAINERS / "vertex_strict")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.strip().endswith("it is the project holding the package, not the package: pass "
                                        "--package-path trainer"), done.stderr


def test_a_setup_py_reading_a_file_the_sdist_lacks_is_refused_with_the_cause_and_the_fix(tmp_path):
    """#21: a setup.py that reads requirements.txt, without the MANIFEST.in that ships it: the build's own cause
    (FileNotFoundError) and how to ship the file, in one line, exit 2; nothing left in dist/."""
    project = tmp_path / "project"
    shutil.copytree(TRAINERS / "setup_reads_requirements", project)
    (project / "MANIFEST.in").unlink()
    done = mlsubmit("package", "--package-path", str(project / "trainer"), "--dist-dir", str(tmp_path / "dist"))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "does not install (pip exit code 1): FileNotFoundError: [Errno 2] No such file or directory: " \
           in done.stderr
    assert done.stderr.strip().endswith("the setup.py reads requirements.txt, which the sdist does not carry: ship it "
                                        "(a MANIFEST.in line `include requirements.txt`, or package data), or stop "
                                        "reading it in setup.py")
    assert not list((tmp_path / "dist").glob("*"))


def test_a_tensorflow_gs_write_in_the_emulator_says_why_and_what_to_do(cloud, tmp_path):
    """#21: TensorFlow's GCS filesystem never reaches the emulator; the job's error says so, once, with the fix."""
    from support.tiny_package import make_project

    task = ("import os\nimport tensorflow as tf\n\n"
            "tf.io.gfile.makedirs(os.environ['AIP_MODEL_DIR'])\n")
    package = make_project(tmp_path / "proj", task=task)
    done = cloud.run("train", "--package-path", str(package), "--module-name", "tinypkg.task", "--job-name",
                     "tf_gs_write", "--skip-preflight")
    assert done.code == 1, done.stdout + done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "The replica workerpool0-0 exited with a non-zero status of 1. Termination reason: Error. (emulator) " \
           "TensorFlow's own GCS filesystem (tf.io.gfile, model.save or checkpoints to gs://) cannot reach the " \
           "emulator's Cloud Storage" in last, last
    assert "mlsubmit_runtime.artifacts.publish_dir" in last
