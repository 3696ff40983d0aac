"""What mlsubmit keeps on disk, and keeping it bounded (mlsubmit.cache, mlsubmit.images.job_envs, `mlsubmit cache`).

- Job environments on the real default image environment (TensorFlow 2.21, from the suite's images dir, linked into
  this test's own): an edit adds the package alone, the requirements are installed once and shared, and a
  requirement on TensorFlow under another name never installs a second TensorFlow.
- `mlsubmit cache list|prune` on real directories, with real processes holding and running from them.
- A build that runs out of a real disk: a 256 kB tmpfs mounted in a private mount namespace (`unshare`), so nothing
  outside the test sees it; skipped, with the reason, where this machine allows no such mount.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mlsubmit.cache import entries, inventory, ownership
from mlsubmit.cache.inventory import Entry, plan
from mlsubmit.cache.limits import Limits, parse_age, parse_size
from mlsubmit.errors import UsageError

DAY = 86400.0
HEAVY = ("tensorflow", "keras", "googleapiclient", "google.cloud", "google.auth", "pydantic", "urllib.request", "ssl")


def _mlsubmit(*args: str, env: dict, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mlsubmit", *args], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "NO_COLOR": "1", **env}, timeout=timeout)


# -- the plan, pure ---------------------------------------------------------------------------------------------
def _entry(kind: str, name: str, size: int, age_days: float, parents: tuple[str, ...] = ()) -> Entry:
    return Entry(kind, Path(name), size, 1000 * DAY - age_days * DAY, tuple(Path(p) for p in parents))


def test_the_plan_removes_least_recently_used_first_with_what_is_built_on_it_and_never_what_is_in_use():
    image = _entry("image-env", "/i/env-a", 2_000, 40)
    old_job = _entry("job-env", "/i/jobs/j1", 10, 41, ("/i/deps/d1", "/i/env-a"))
    layer = _entry("requirements-env", "/i/deps/d1", 100, 39, ("/i/env-a",))
    other_image = _entry("image-env", "/i/env-b", 1_500, 5)
    records = _entry("cluster-record", "/h/cluster-jobs/x", 50_000, 400)
    found = [image, old_job, layer, other_image, records]

    by_age = plan(found, Limits(max_age=30 * DAY), now=1000 * DAY, in_use=frozenset())
    assert [r.entry.path.name for r in by_age.removals] == ["j1", "d1", "env-a"]  # what is built on another first
    assert by_age.size_before == 3_610 and by_age.size_after == 1_500  # job records neither count nor go

    by_size = plan(found, Limits(max_size=2_000), now=1000 * DAY, in_use=frozenset())
    reasons = {r.entry.path.name: r.reason for r in by_size.removals}  # the two oldest are enough
    assert reasons == {"j1": "least recently used, over the limit of 2.0 kB", "env-a": reasons["j1"],
                       "d1": "built on a removed image environment"}
    # the job environment is in use: what it is built on is too, so the newer image goes instead
    busy = inventory.busy(found, running=["/i/jobs/j1/bin/python"])
    assert busy == {Path("/i/jobs/j1"), Path("/i/deps/d1"), Path("/i/env-a")}
    held = plan(found, Limits(max_size=2_000, max_age=30 * DAY), now=1000 * DAY, in_use=busy)
    assert [r.entry.path.name for r in held.removals] == ["env-b"]
    assert {e.path.name for e in held.in_use} == {"j1", "d1", "env-a"}


def test_sizes_and_ages_as_users_write_them():
    assert parse_size("20GB", "--max-size") == 20 * 10**9 and parse_size("1.5GiB", "x") == int(1.5 * 2**30)
    assert parse_size("500mb", "x") == 500 * 10**6 and parse_age("30d", "x") == 30 * DAY
    assert parse_age("12h", "x") == 12 * 3600 and parse_age("2w", "x") == 14 * DAY
    for bad in ("20 parsecs", "-1GB", "", "٣GB"):
        with pytest.raises(UsageError, match="invalid value for --max-size: received"):
            parse_size(bad, "--max-size")
    with pytest.raises(UsageError, match="expected an age such as 30d"):
        parse_age("30", "--older-than")


# -- list and prune on real directories ---------------------------------------------------------------------------
def _venv_like(path: Path, size: int = 50_000, on: Path | None = None, age_days: float = 0,
               marked: bool = True) -> Path:
    """A venv as mlsubmit builds one (`marked`: with the mark it writes), `age_days` unused."""
    site = path / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    if marked:
        ownership.mark(path, "environment")
    (site / "module.py").write_bytes(b"#" * size)
    (path / "pyvenv.cfg").write_text(f"home = {Path(sys.executable).parent}\n")
    (path / "bin").mkdir()
    (path / "bin" / "python").symlink_to(sys.executable)
    if on is not None:
        (site / "_mlsubmit_image.pth").write_text(
            f"import site; site.addsitedir({str(on / 'lib' / 'python3.11' / 'site-packages')!r})\n")
    _age(path, age_days)
    return path


def _age(path: Path, days: float) -> None:
    then = time.time() - days * DAY
    for item in [path, *path.rglob("*")]:
        if not item.is_symlink():
            os.utime(item, (then, then))


def test_cache_list_and_prune_keep_what_running_processes_use(tmp_path):
    home, images = tmp_path / "home", tmp_path / "images"
    image = images / "tensorflow_tensorflow_2.21.0"
    env = _venv_like(image / "env-aaa", 300_000, age_days=40)
    held_job = _venv_like(image / "jobs" / "held-env-aaa", on=env, age_days=40)
    old_job = _venv_like(image / "jobs" / "old-env-aaa", on=env, age_days=40)
    new_job = _venv_like(image / "jobs" / "new-env-bbb", on=None, age_days=1)
    running = _venv_like(home / "venvs" / "running-py311", age_days=40)
    (image / "packages.json").write_text("[]")
    stopped = image / "jobs" / ".installing-0123456789ab"  # a build killed mid-way: its lock is free
    stopped.mkdir()
    ownership.mark(stopped, "environment")
    (image / "jobs" / ".installing-0123456789ab.lock").touch()
    ownership.make_folder(home / "sdists" / "abc", "sdist")
    (home / "sdists" / "abc" / "tiny-0.1.tar.gz").write_bytes(b"x" * 1000)
    _age(home / "sdists", 50)
    ownership.make_folder(home / "replicas" / "job_1", "replicas")
    _age(home / "replicas", 90)
    (home / "notes.txt").write_text("mine")
    env_vars = {"MLSUBMIT_HOME": str(home), "MLSUBMIT_IMAGES": str(images)}

    holder = subprocess.Popen([sys.executable, "-c", "import sys; from pathlib import Path; from mlsubmit.cache import "
                               f"entries; entries.hold(Path({str(held_job)!r})); print('held', flush=True); "
                               "sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    started_from = subprocess.Popen([str(running / "bin" / "python"), "-c", "import sys; sys.stdin.read()"],
                                    stdin=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == "held"
        listed = json.loads(_mlsubmit("cache", "list", "-o", "json", env=env_vars).stdout)
        by_path = {Path(e["path"]).name: e for e in listed["entries"]}
        assert by_path["env-aaa"]["kind"] == "image-env" and by_path["env-aaa"]["size_bytes"] >= 300_000
        assert by_path["held-env-aaa"]["built_on"] == [str(env)] and by_path["held-env-aaa"]["in_use"]
        assert by_path["env-aaa"]["in_use"] and by_path["running-py311"]["in_use"]  # below a held one; started from
        assert not by_path["old-env-aaa"]["in_use"] and by_path[stopped.name]["kind"] == "unfinished"
        assert by_path["notes.txt"]["kind"] == "other" and not by_path["notes.txt"]["prunable"]
        table = _mlsubmit("cache", "list", env=env_vars).stdout
        assert "built sdists (1)" in table and "replica directories (1)" in table and "in use" in table

        dry = _mlsubmit("cache", "prune", "--older-than", "30d", "--dry-run", env=env_vars)
        assert dry.returncode == 0 and f"would remove job environment {old_job} " in dry.stdout and old_job.exists()
        # everything that can be rebuilt, but what is in use: held, started from, or below one that is
        pruned = json.loads(_mlsubmit("cache", "prune", "--max-size", "0", "-o", "json", env=env_vars).stdout)
        removed = {Path(e["path"]).name for e in pruned["removed"]}
        assert removed == {"old-env-aaa", "new-env-bbb", stopped.name, "abc"}, pruned
        assert {Path(e["path"]).name for e in pruned["kept_in_use"]} == {"held-env-aaa", "env-aaa", "running-py311"}
        assert not old_job.exists() and not new_job.exists() and not stopped.exists()
        assert held_job.exists() and env.exists()
        assert not list((image / "jobs").glob(".*"))  # nothing half-removed: the lock went with its build
    finally:
        for process in (holder, started_from):
            process.communicate(timeout=30)
    pruned = _mlsubmit("cache", "prune", "--max-size", "0", env=env_vars)
    assert pruned.returncode == 0 and not held_job.exists() and not env.exists() and not running.exists()
    assert "removed image environment" in pruned.stdout and "removed isolated venv" in pruned.stdout
    assert (home / "replicas" / "job_1").exists() and (home / "notes.txt").exists()  # not what mlsubmit rebuilds
    bad = _mlsubmit("cache", "prune", "--max-size", "lots", env=env_vars)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "error: invalid value for --max-size: received 'lots'; expected a size such as 20GB, 500MB or 1.5GiB "
        "(GB = 10^9 bytes, GiB = 2^30)"]


def test_the_prune_after_a_build_follows_the_settings_and_a_bad_setting_stops_train_before_it_builds(tmp_path,
                                                                                                   monkeypatch):
    home = tmp_path / "home"
    old = _venv_like(home / "venvs" / "old-py311", 200_000, age_days=3)
    new = _venv_like(home / "venvs" / "new-py311", 200_000)
    monkeypatch.setenv("MLSUBMIT_HOME", str(home))
    monkeypatch.setenv("MLSUBMIT_IMAGES", str(tmp_path / "images"))
    monkeypatch.setenv("MLSUBMIT_CACHE_MAX_SIZE", "300kB")
    said: list[str] = []
    inventory.after_build(said.append)
    assert not old.exists() and new.exists()
    assert len(said) == 1 and said[0].startswith("cache: removed 1 unused item(s) (isolated venv; 2"), said
    monkeypatch.setenv("MLSUBMIT_CACHE_MAX_SIZE", "lots")
    said.clear()
    inventory.after_build(said.append)  # said, never raised: the job goes on
    assert said == ["warning: the cache was not pruned: invalid value for MLSUBMIT_CACHE_MAX_SIZE: received 'lots'; "
                    "expected a size such as 20GB, 500MB or 1.5GiB (GB = 10^9 bytes, GiB = 2^30)"]
    monkeypatch.delenv("MLSUBMIT_CACHE_MAX_SIZE")
    package = Path(__file__).parent / "fixtures" / "trainers" / "vertex_strict" / "trainer"
    done = _mlsubmit("train", "--local", "--package-path", str(package), env={"MLSUBMIT_CACHE_MAX_AGE": "a month"},
                     cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        "error: invalid value for MLSUBMIT_CACHE_MAX_AGE: received 'a month'; expected an age such as 30d, 12h, 2w "
        "or 90m (m: minutes)"], done.stderr
    assert not (home / "sdists").exists() and new.exists()  # nothing was built


def test_cache_commands_import_no_heavy_library(tmp_path):
    probe = ("import runpy, sys\nsys.argv = ['mlsubmit', 'cache', 'list', '-o', 'json']\ntry:\n"
             "    runpy.run_module('mlsubmit', run_name='__main__')\nexcept SystemExit:\n    pass\n"
             f"print(sorted(m for m in sys.modules if m.startswith({HEAVY!r})), file=sys.stderr)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          env={**os.environ, "MLSUBMIT_HOME": str(tmp_path), "MLSUBMIT_IMAGES": str(tmp_path)})
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr


# -- job environments on the real image environment -------------------------------------------------------------
@pytest.fixture
def default_image(tmp_path, monkeypatch, images_home):
    """The default image (tensorflow/tensorflow:2.21.0) and this test's own images dir, where its real environment
    (built once in the suite's images dir) is linked: what the test builds lands here and goes with it."""
    from mlsubmit.images import choose, envs
    from mlsubmit.jobspec.spec import JobSpec

    image = choose.job_image(JobSpec())
    python, _ = envs.image_python(image)
    mine = tmp_path / "images" / image.key
    mine.mkdir(parents=True)
    shutil.copy(images_home / image.key / "packages.json", mine)
    (mine / python.parent.parent.name).symlink_to(python.parent.parent)
    monkeypatch.setenv("MLSUBMIT_IMAGES", str(tmp_path / "images"))
    return image, mine, python.parent.parent


def _sdist(where: Path, edit: int, requires: list[str]) -> Path:
    """An edit of a tiny trainer package: its sdist, built as mlsubmit builds it."""
    from mlsubmit.packaging.sdist import plan_sdist, write_sdist

    project = where / f"edit{edit}"
    (project / "trainer").mkdir(parents=True)
    (project / "trainer" / "__init__.py").write_text("")
    (project / "trainer" / "task.py").write_text(f"import tabulate\nprint('edit {edit}')\n")
    (project / "setup.py").write_text("from setuptools import setup\nsetup(name='tiny', version='0.1', "
                                      f"packages=['trainer'], install_requires={requires!r})\n")
    return write_sdist(plan_sdist(project / "trainer"), where / f"dist{edit}").path


def test_an_edit_adds_only_the_package_and_never_a_second_tensorflow(tmp_path, default_image):
    from mlsubmit.images import job_envs

    image, mine, real_env = default_image
    # the image carries `tensorflow`, its environment that version's CPU build (tensorflow-cpu): `tensorflow` is met
    requires = ["tabulate", "tensorflow>=2.21,<2.22"]
    first, reused = job_envs.job_python(image, [_sdist(tmp_path, 1, requires)])
    second, again = job_envs.job_python(image, [_sdist(tmp_path, 2, requires)])
    assert not reused and not again and first != second
    (layer,) = (mine / "deps").iterdir()  # the requirements: installed once, shared by both edits
    added = inventory.disk_usage(second.parent.parent)
    assert added < 1_000_000, f"an edit added {added:,} bytes (26 MB with a venv of its own and pip)"
    for environment in (first.parent.parent, second.parent.parent, layer):
        assert not list(environment.glob("lib/python*/site-packages/tensorflow/")), environment
    probe = ("import importlib.util, importlib.metadata as m, json, tabulate\n"
             "print(json.dumps([importlib.util.find_spec('tensorflow').origin, m.version('tensorflow'), "
             "m.distribution('tensorflow').read_text('INSTALLER').strip(), tabulate.__file__]))")
    origin, version, installer, tabulate_file = json.loads(subprocess.run(
        [str(second), "-I", "-c", probe], capture_output=True, text=True, check=True).stdout)
    assert Path(origin).resolve().is_relative_to(real_env.resolve()) and version == "2.21.0"
    assert installer == "mlsubmit-alias" and Path(tabulate_file).is_relative_to(layer)
    checked = subprocess.run([str(second), "-m", "pip", "check"], capture_output=True, text=True)
    assert checked.returncode == 0 and "No broken requirements found" in checked.stdout, checked.stdout
    assert str(second.parent.parent) in entries.held() and str(layer) in entries.held()  # never pruned under us


# -- out of disk --------------------------------------------------------------------------------------------------
def _private_mount_prefix() -> list[str] | None:
    """The `unshare` command that gives a private mount namespace here (root: plain; else a user namespace), or
    None when this machine allows neither."""
    if shutil.which("unshare") is None:
        return None
    for prefix in (["unshare", "--mount", "--propagation", "private"],
                   ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"]):
        try:
            done = subprocess.run([*prefix, "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt 2>/dev/null || "
                                   "mount -t tmpfs -o size=64k tmpfs \"$HOME\""], capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return prefix
    return None


def test_a_build_that_runs_out_of_disk_is_one_line_and_leaves_nothing(tmp_path, default_image):
    prefix = _private_mount_prefix()
    if prefix is None:
        pytest.skip("no private mount namespace with a tmpfs here (unshare --mount, or a user namespace): no real "
                    "full disk to build on")
    image, mine, real_env = default_image
    disk = tmp_path / "disk"
    disk.mkdir()
    project = tmp_path / "work" / "edit"
    (project / "trainer").mkdir(parents=True)
    (project / "trainer" / "__init__.py").write_text("")
    (project / "trainer" / "task.py").write_text("import tabulate\n")
    (project / "setup.py").write_text("from setuptools import setup\nsetup(name='tiny', version='0.1', "
                                      "packages=['trainer'], install_requires=['tabulate'])\n")
    script = f"""
set -e
mount -t tmpfs -o size=256k tmpfs {disk}
mkdir -p {disk}/images/{image.key}
cp {mine}/packages.json {disk}/images/{image.key}/
ln -s {real_env} {disk}/images/{image.key}/{real_env.name}
set +e
MLSUBMIT_IMAGES={disk}/images {sys.executable} -m mlsubmit train --local --package-path {project}/trainer \
    > {tmp_path}/out 2> {tmp_path}/err
echo $? > {tmp_path}/rc
cd {disk}/images/{image.key} && find . -path ./{real_env.name} -prune -o -print | sort > {tmp_path}/left
"""
    subprocess.run([*prefix, "sh", "-c", script], check=True, timeout=300, cwd=project.parent,
                   env={**os.environ, "MLSUBMIT_IMAGE_ENV": "1", "NO_COLOR": "1"})
    err = (tmp_path / "err").read_text().strip().splitlines()
    assert (tmp_path / "rc").read_text().strip() == "1", (tmp_path / "out").read_text()[-2000:] + "\n".join(err)
    assert len(err) == 1 and err[0].startswith("error: out of disk space while building the "), err
    assert f"in {disk}/images/{image.key}/" in err[0] and "mlsubmit cache prune" in err[0]
    left = (tmp_path / "left").read_text().split()
    assert not [path for path in left if "/jobs/" in path or "/deps/" in path], left  # nothing half-made


# -- only what mlsubmit made is removed -------------------------------------------------------------------------
def _beside_the_cache(home: Path, images: Path) -> list[Path]:
    """What other programs and the user keep in a shared MLSUBMIT_HOME / MLSUBMIT_IMAGES, unused for 60 days: a
    project's trained model where a job environment would be, another program's cache, a research venv, and an image
    environment an mlsubmit from before the marks built (all without mlsubmit's mark)."""
    made = []
    for path, size in ((images / "jobs" / "run1" / "model" / "model.keras", 9_000),
                       (images / "myproject" / "jobs" / "run1" / "model" / "model.keras", 12_300),
                       (home / "cache" / "otherapp" / "blob.bin", 4_000),
                       (home / "preflight" / "notes.json", 100)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"k" * size)
        made.append(path)
    made.append(_venv_like(home / "venvs" / "my-research-env", marked=False))
    made.append(_venv_like(images / "tensorflow_tensorflow_2.8.0" / "env-0123456789abcdef", marked=False))
    for path in made:
        _age(path if path.is_dir() else path.parent, 60)
        _age(path, 60)
    return made


def test_what_mlsubmit_did_not_make_is_listed_as_not_mlsubmits_and_no_prune_removes_it(tmp_path):
    home, images = tmp_path / "home", tmp_path / "images"
    others = _beside_the_cache(home, images)
    ours = _venv_like(home / "venvs" / "0123456789abcdef-py311", age_days=60)
    downloads = home / "cache" / "sha256" / "ab"
    downloads.mkdir(parents=True)
    for name in ("ab01.keras", "ab02.keras"):  # two downloads mlsubmit kept, 60 days ago
        (downloads / f".{name}.partial").write_bytes(b"m" * 3000)
        _age(downloads / f".{name}.partial", 60)
        ownership.keep(downloads / f".{name}.partial", downloads / name, "download")
    (downloads / "ab02.keras").unlink()  # another program's file since, under the same name (and maybe inode)
    (downloads / "ab02.keras").write_bytes(b"x" * 3000)
    _age(downloads / "ab02.keras", 60)
    env_vars = {"MLSUBMIT_HOME": str(home), "MLSUBMIT_IMAGES": str(images)}

    listed = json.loads(_mlsubmit("cache", "list", "-o", "json", env=env_vars).stdout)["entries"]
    not_ours = {Path(e["path"]) for e in listed if not e["mlsubmits"]}
    project, research_env, old_env = images / "myproject" / "jobs" / "run1", others[4], others[5]
    assert {images / "jobs", project, others[2], others[3], research_env, old_env} <= not_ours
    assert downloads / "ab02.keras" in not_ours and {e["kind"] for e in listed if not e["mlsubmits"]} == {"other"}
    assert {Path(e["path"]) for e in listed if e["mlsubmits"] and e["prunable"]} == {ours, downloads / "ab01.keras"}
    table = _mlsubmit("cache", "list", env=env_vars).stdout
    assert "not mlsubmit's (unmarked isolated venv)" in table and str(home / "venvs" / "my-research-env") in table
    assert "are not mlsubmit's: they lack the .mlsubmit-owned mark" in table and "rm -r PATH" in table

    dry = _mlsubmit("cache", "prune", "--max-size", "0", "--older-than", "0s", "--dry-run", env=env_vars)
    assert dry.returncode == 0 and dry.stdout.count("would remove ") == 2, dry.stdout
    assert f"would remove isolated venv {ours} " in dry.stdout and "otherapp" not in dry.stdout
    pruned = _mlsubmit("cache", "prune", "--max-size", "0", "--older-than", "0s", env=env_vars)
    assert pruned.returncode == 0 and pruned.stdout.count("removed ") == 2, pruned.stdout
    assert not ours.exists() and not (downloads / "ab01.keras").exists()
    assert all(path.exists() for path in others) and (downloads / "ab02.keras").read_bytes() == b"x" * 3000


def test_the_prune_after_a_real_build_removes_only_what_mlsubmit_made_and_says_so(tmp_path, default_image):
    from support.tiny_package import make_project

    image, mine, _ = default_image
    home, images = tmp_path / "home", tmp_path / "images"
    others = _beside_the_cache(home, images)
    ours = _venv_like(home / "venvs" / "0123456789abcdef-py311", age_days=60)
    package = make_project(tmp_path / "proj")
    done = _mlsubmit("train", "--local", "--package-path", str(package), "--module-name", "tinypkg.task", "--",
                     "--job-dir", str(tmp_path / "job"), cwd=tmp_path, timeout=300,
                     env={"MLSUBMIT_HOME": str(home), "MLSUBMIT_IMAGES": str(images), "MLSUBMIT_CACHE_MAX_AGE": "30d"})
    assert done.returncode == 0, done.stderr[-3000:]
    said = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("cache: removed")]
    assert said and said[0].startswith("cache: removed 1 unused item(s) (isolated venv; "), done.stdout
    assert not ours.exists() and all(path.exists() for path in others)
    built = [p for p in [*(home / "venvs").iterdir(), *mine.glob("jobs/*")] if p != others[4]]
    assert built and all(ownership.owned(path) for path in built), built  # what the build made carries the mark


def test_a_prune_that_cannot_write_the_home_is_one_line(tmp_path):
    from support.unprivileged import as_a_user

    home = tmp_path / "home"
    ours = _venv_like(home / "venvs" / "0123456789abcdef-py311", age_days=60)
    (home / "venvs").chmod(0o555)
    try:
        done = subprocess.run([sys.executable, "-m", "mlsubmit", "cache", "prune", "--older-than", "30d"],
                              capture_output=True, text=True, timeout=120, **as_a_user(),
                              env={**os.environ, "MLSUBMIT_HOME": str(home), "MLSUBMIT_IMAGES": str(tmp_path / "i")})
    finally:
        (home / "venvs").chmod(0o755)
    assert done.returncode == 2 and done.stdout == "" and ours.exists()
    assert done.stderr.splitlines() == [
        f"error: cannot prune what mlsubmit keeps: {home / 'venvs'} is read-only here (1 item(s), "
        f"{done.stderr.split('item(s), ')[1].split(',')[0]}, would be removed); nothing was removed; run it as the user "
        "who can write there, or make it writable; `mlsubmit cache prune --dry-run` lists what would go"], done.stderr
