"""The replica launcher (mlsubmit/launcher/replica.py): what it sets for each replica, and real replicas it runs.

The real runs start the launcher as a target ships it — its source alone, `python3 -c "$(source)" SPEC.json`, in a
clean directory where mlsubmit cannot be imported — on 127.0.0.1, with a tiny package built as an sdist.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mlsubmit.jobspec.spec import JobSpec, Pool
from mlsubmit.launcher import replica, source
from mlsubmit.local import children, local_job
from tests.support.engine_checks import TASK, tiny_project



def _spec(**pools):
    return JobSpec(tier="CUSTOM", **{r: Pool(r, "n1-standard-4", c) for r, c in pools.items()}, args=("--x", "1"))


@pytest.mark.parametrize("api", ["vertex", "legacy"])
@pytest.mark.parametrize("shape", [dict(chief=1), dict(chief=1, worker=2), dict(chief=1, worker=2, ps=1, evaluator=1)])
def test_local_plan_and_launcher_set_the_same_bytes(api, shape):
    spec = _spec(**shape)
    ports = list(range(5000, 5000 + sum(shape.values())))
    job = local_job.plan(spec, api=api, job_id="j1", job_dir="/tmp/out", ports=ports, gpus_here=0)
    launcher_spec = {"job_id": "j1", "api": api, "tier": "CUSTOM", "roles": list(shape.items()), "module": "m",
                     "addresses": [f"127.0.0.1:{p}" for p in ports], "job_dir": "/tmp/out", "args": ["--x", "1"]}
    for planned in job.replicas:
        env, args = replica.replica_env(launcher_spec, planned.role, planned.index, {})
        assert {k: env[k] for k in planned.env} == dict(planned.env)
        assert args == planned.args


def test_tf_config_exactly_as_the_services_write_it():
    env, args = replica.service_env(api="vertex", job_id="j", tier="CUSTOM", roles=[("chief", 1), ("worker", 1)],
                                    addresses=["h0:1", "h1:2"], role="worker", index=0, job_dir="gs://b/o/",
                                    args=["--a"])
    assert env["TF_CONFIG"] == ('{"cluster": {"chief": ["h0:1"], "worker": ["h1:2"]}, "task": {"type": "worker", '
                                '"index": 0}, "environment": "cloud"}')
    assert json.loads(env["CLUSTER_SPEC"])["task"] == {"type": "workerpool1", "index": 0}
    assert env["AIP_MODEL_DIR"] == "gs://b/o/model/" and args == ("--a",)
    env, args = replica.service_env(api="legacy", job_id="j", tier="CUSTOM", roles=[("chief", 1), ("ps", 1)],
                                    addresses=["h0:1", "h1:2"], role="chief", index=0, job_dir="gs://b/o",
                                    args=["--a"])
    assert json.loads(env["TF_CONFIG"])["cluster"] == {"master": ["h0:1"], "ps": ["h1:2"]}
    assert json.loads(env["TF_CONFIG"])["job"]["parameter_server_count"] == 1
    assert args == ("--a", "--job-dir", "gs://b/o") and "CLUSTER_SPEC" not in env


def test_coordinator_variables_for_jax_keras_and_torch():
    roles = [("chief", 1), ("worker", 2), ("ps", 1)]
    addresses = ["c:10", "w0:11", "w1:12", "p:13"]
    worker = replica.coordinator_env(roles, addresses, "worker", 1)
    assert worker["RANK"] == worker["JAX_PROCESS_ID"] == worker["KERAS_DISTRIBUTION_PROCESS_ID"] == "2"
    assert worker["WORLD_SIZE"] == worker["JAX_NUM_PROCESSES"] == "3"
    assert (worker["MASTER_ADDR"], worker["MASTER_PORT"], worker["JAX_COORDINATOR_ADDRESS"]) == ("c", "10", "c:10")
    assert worker["KERAS_DISTRIBUTION_JOB_ADDRESSES"] == "c:10,w0:11,w1:12"
    assert replica.coordinator_env(roles, addresses, "ps", 0) == {}


def test_indexed_jobs_and_address_patterns():
    spec = {"job_id": "j", "roles": [["chief", 1], ["worker", 2], ["ps", 1]], "module": "m",
            "address_pattern": "{job}-{role}-{index}.svc:2222"}
    assert replica.locate(spec, {"JOB_COMPLETION_INDEX": "2"}) == ("worker", 1)
    assert replica.locate({**spec, "role": "ps"}, {"JOB_COMPLETION_INDEX": "0"}) == ("ps", 0)
    assert replica.locate({**spec, "offsets": {"chief": 0, "worker": 1, "ps": 3}},
                          {"JOB_COMPLETION_INDEX": "3"}) == ("ps", 0)
    assert replica.addresses_of(spec)[3] == "j-ps-0.svc:2222"
    with pytest.raises(replica.SpecError, match="outside the job's 4 replicas"):
        replica.locate(spec, {"JOB_COMPLETION_INDEX": "4"})
    with pytest.raises(replica.SpecError, match="chief"):
        replica.check_spec({**spec, "roles": [["worker", 1]]})


def test_the_launcher_imports_nothing_but_the_standard_library():
    # -I -S: no site-packages, no mlsubmit; it gets as far as asking for its spec (exit 2, one line)
    done = subprocess.run([sys.executable, "-I", "-S", "-c", source()], capture_output=True, text=True, cwd="/",
                          env={"PATH": os.environ["PATH"]})
    assert (done.returncode, done.stderr.count("\n")) == (2, 1) and "no spec" in done.stderr, done.stderr
    imported = {line.split()[1].split(".")[0] for line in source().splitlines()
                if line.startswith(("import ", "        import ", "    import "))}
    assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)


@pytest.fixture(scope="module")
def tiny_sdist(tmp_path_factory):
    from mlsubmit import packaging

    package = tiny_project(tmp_path_factory.mktemp("proj"))
    return packaging.write_sdist(packaging.plan_sdist(package, None), tmp_path_factory.mktemp("dist")).path


def _start(spec: dict, tmp: Path, name: str) -> subprocess.Popen:
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(spec))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return children.popen([sys.executable, "-c", source(), str(path)], cwd=tmp, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)


def _job(tiny_sdist, tmp_path, shape, args=()):
    ports = local_job.reserve_ports(sum(c for _, c in shape))
    return {"job_id": "launch1", "roles": shape, "module": "tinypkg.task", "args": list(args),
            "addresses": [f"127.0.0.1:{p}" for p in ports], "packages": [f"file://{tiny_sdist}"],
            "job_dir": str(tmp_path / "out"), "cache_dir": str(tmp_path / "cache"), "work_root": str(tmp_path),
            "grace_seconds": 1, "chief_gone_seconds": 1}


def test_a_chief_and_a_parameter_server_on_127_0_0_1_end_together(tiny_sdist, tmp_path):
    job = _job(tiny_sdist, tmp_path, [["chief", 1], ["ps", 1]], ["--a", "two words"])
    ps = _start({**job, "role": "ps", "index": 0}, tmp_path, "ps")
    chief = _start({**job, "role": "chief", "index": 0}, tmp_path, "chief")
    chief_out, _ = chief.communicate(timeout=120)
    ps_out, _ = ps.communicate(timeout=60)
    assert chief.returncode == 0, chief_out
    assert ps.returncode == 0, ps_out  # ended by the launcher once the chief was gone, as the service ends it
    assert "role chief 0 rank 0 args ['--a', 'two words']" in chief_out and "chief done" in chief_out
    assert "role ps 0 rank None" in ps_out and "the chief has ended" in ps_out
    cwds = {line.split()[1] for line in (chief_out + ps_out).splitlines() if line.startswith("cwd ")}
    assert len(cwds) == 2 and not any(Path(c).exists() for c in cwds)  # private, removed after
    # the venv was built once (by whichever came first) and is reused by the next run
    again = _start({**job, "role": "chief", "index": 0, "roles": [["chief", 1]], "addresses": job["addresses"][:1]},
                   tmp_path, "again")
    out, _ = again.communicate(timeout=120)
    assert again.returncode == 0 and "already installed" in out, out


def test_a_failing_replica_exits_with_its_code(tiny_sdist, tmp_path):
    job = _job(tiny_sdist, tmp_path, [["chief", 1], ["worker", 1]], ["--fail"])
    worker = _start({**job, "role": "worker", "index": 0}, tmp_path, "w")
    out, _ = worker.communicate(timeout=120)
    assert worker.returncode == 7 and "the worker fails on purpose" in out


def test_a_package_that_does_not_install_fails_with_pips_reason(tmp_path):
    from mlsubmit import packaging
    from support.tiny_package import make_project

    package = make_project(tmp_path / "proj", python_requires=">=3.99")
    sdist = packaging.write_sdist(packaging.plan_sdist(package, None), tmp_path / "dist").path
    job = {**_job(sdist, tmp_path, [["chief", 1]]), "role": "chief", "index": 0}
    chief = _start(job, tmp_path, "c")
    out, _ = chief.communicate(timeout=120)
    assert chief.returncode == replica.INSTALL_FAILED, out
    assert "pip could not install tinypkg-1.2.0.tar.gz" in out and "requires a different Python" in out, out
    assert not list((tmp_path / "cache").glob("*-py*/bin"))  # nothing that looks installed


def test_gcs_packages_are_fetched_through_the_json_api(gcs, tiny_sdist, tmp_path):
    emulator, bucket = gcs
    from mlsubmit.emulator.gcs_emulator import storage_client

    storage_client("p").bucket(bucket).blob("staging/tinypkg.tar.gz").upload_from_filename(str(tiny_sdist))
    got = replica.fetch(f"gs://{bucket}/staging/tinypkg.tar.gz", str(tmp_path), dict(os.environ))
    assert Path(got).read_bytes() == tiny_sdist.read_bytes()



COLLECTIVE = '''\
import os, sys
if sys.argv[1] == "torch":
    import torch, torch.distributed as dist
    dist.init_process_group("gloo")  # env://: MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE from the launcher
    total = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(total)
    print("torch rank", dist.get_rank(), "of", dist.get_world_size(), "sum", total.item(), flush=True)
    dist.destroy_process_group()
else:
    import jax
    jax.distributed.initialize(os.environ["JAX_COORDINATOR_ADDRESS"], int(os.environ["JAX_NUM_PROCESSES"]),
                               int(os.environ["JAX_PROCESS_ID"]))
    print("jax process", jax.process_index(), "of", jax.process_count(), "devices", jax.device_count(), flush=True)
'''


@pytest.mark.parametrize("framework", ["torch", "jax"])
def test_coordinator_variables_bring_up_a_real_two_process_job(framework, tmp_path):
    """The launcher's JAX and torch variables, used by the frameworks themselves: a chief and a worker of an
    already-installed environment (`python`) form one process group on 127.0.0.1. (Keras 3's
    keras.distribution.initialize() reads KERAS_DISTRIBUTION_* and calls the same jax.distributed.initialize; it
    imports Keras too, which made this test six times slower.)"""
    pytest.importorskip(framework)
    (tmp_path / "collective.py").write_text(COLLECTIVE)
    ports = local_job.reserve_ports(2)
    job = {"job_id": "coord1", "roles": [["chief", 1], ["worker", 1]], "module": "collective", "args": [framework],
           "addresses": [f"127.0.0.1:{p}" for p in ports], "python": sys.executable, "quiet": True,
           "env": {"PYTHONPATH": str(tmp_path), "JAX_PLATFORMS": "cpu"}, "work_root": str(tmp_path)}
    started = [_start({**job, "role": role, "index": 0}, tmp_path, role) for role in ("chief", "worker")]
    outs = [p.communicate(timeout=120)[0] for p in started]
    assert [p.returncode for p in started] == [0, 0], outs
    said = [[line for line in out.splitlines() if line.startswith(framework)] for out in outs]
    if framework == "torch":
        assert said == [["torch rank 0 of 2 sum 3.0"], ["torch rank 1 of 2 sum 3.0"]], outs
    else:
        assert [s[0].split()[:5] for s in said] == [["jax", "process", "0", "of", "2"],
                                                    ["jax", "process", "1", "of", "2"]], outs
    assert not any(line.startswith("[launcher]") for out in outs for line in out.splitlines())  # quiet
