"""One replica of a training job, started the way the cloud starts it. STANDARD LIBRARY ONLY, self-contained.

This file is shipped as source to wherever a replica runs (a Spark executor, a Dask worker, a Ray actor, a
Kubernetes pod on a plain Python/TensorFlow image) and run there without mlsubmit installed:

    python3 replica.py SPEC.json            # a file
    python3 replica.py --spec '{"job_id": …}'
    MLSUBMIT_REPLICA_SPEC='{…}' python3 replica.py
    python3 -c "$(cat replica.py)" SPEC.json

The spec (JSON object; only job_id, roles, module and an address source are required):
    job_id, api ("vertex": the chief is `chief`, CLUSTER_SPEC, AIP_* below job_dir; "legacy": `master`, `--job-dir`
    added to the args, the job's counts under TF_CONFIG's `job`), tier (legacy's scale_tier, default CUSTOM)
    roles        [[role, count], …] in pool order: chief, worker, ps, evaluator
    role, index  this replica. Without `index`: $JOB_COMPLETION_INDEX (one Indexed Job per role). Without `role`:
                 $JOB_COMPLETION_INDEX is the replica's place in `roles` order (one Indexed Job for all), or the
                 offset map `offsets` {role: first index} says where each role starts.
    addresses    ["host:port", …] every replica's, in `roles` order; or
    address_pattern  "{job}-{role}-{index}.svc:2222" (fields: job, role, index, rank = place in roles order)
    job_dir, packages [local path | file:// | gs:// | /gcs/… | {"name": FILE, "data": BASE64}] installed in order,
    requirements ["tensorboard~=2.21.0", …] what the job's image adds (mlsubmit.images), installed with the packages,
    module, args (passed EXACTLY),
    env {NAME: value} (the job's own variables, set last), coordinator (default true: JAX/Keras/torch variables)
    control      "host:port" of the submitting side: lines go there as JSON, it may send {"chief_done": true} or
                 {"stop": true}; losing it stops the replica (so nothing outlives the submitting mlsubmit).
    token        sent first on the control connection.
    watch_chief  (default true without `control`) a ps, worker or evaluator ends when the chief has ended: the chief's
                 address accepted connections once and then refuses them for `chief_gone_seconds` (default 10).
    grace_seconds (15), evaluator_grace_seconds (120): how long a replica may finish on its own once the chief
                 ended before it is stopped (it then exits 0, as the service ends them).
    cache_dir    where venvs are kept by the packages' sha256 and the node's Python (default
                 $MLSUBMIT_HOME/launcher or ~/.mlsubmit/launcher); work_root: where the replica's private working
                 directory is made (removed after, unless keep_workdir).
    node_python  the interpreter `run_in_subprocess` starts the launcher with on the node (a path or a name on its
                 PATH; default the engine worker's own Python): the replica's venv, pip and module are that Python's.
    python       an environment installed already (`train --local`'s venv): the module runs with this interpreter
                 and no package is installed.
    workdir      a private working directory prepared already (`train --local`'s mirror of the user's directory,
                 mlsubmit.local.workdir): the module runs there, PWD says so, and it is kept after.
    quiet        (default false) no `[launcher]` lines of its own but errors: the output is the module's alone.
    same_group   (default false) the module stays in the launcher's process group, so whoever stops that group
                 (`train --local`'s runner) stops the module and what it started, as if it had started it itself.

Output: every line of the module (stdout and stderr) on stdout, the launcher's own prefixed `[launcher] `.
Exit status: the module's (killed by a signal: the launcher ends by the same signal); 0 when stopped after the chief
ended; 143 when stopped because the job was cancelled (SIGTERM, `stop`, or the control connection lost); 3 when the
packages do not install; 2 for a bad spec.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

SPEC_VARIABLE = "MLSUBMIT_REPLICA_SPEC"
ROLE_ORDER = ("chief", "worker", "ps", "evaluator")
POOL = {"chief": "workerpool0", "worker": "workerpool1", "ps": "workerpool2", "evaluator": "workerpool3"}
MAX_LINE = 65_536  # characters: a longer line is passed on in pieces, never held whole (as mlsubmit's runner reads)
# `python -m MODULE ARGS` without the working directory on sys.path, for Pythons without PYTHONSAFEPATH (< 3.11).
# The working directory's entry is REPLACED by one that names no directory, not deleted: a namespace package that a
# `*-nspkg.pth` file made at start-up (protobuf 3.x's `google`, on the TF 2.8-2.11 images) computes its __path__
# again only when sys.path differs from what it was then, and deleting the entry gives back exactly that list, so
# `google.cloud` from another site directory would never be found. Any other change would do; this adds nothing.
RUN_MODULE_UNSHADOWED = ("import runpy, sys; sys.path[0] = sys.prefix + '/.mlsubmit-not-the-working-directory'; "
                         "runpy.run_module(sys.argv.pop(1), run_name='__main__', alter_sys=True)")
SERVICE_VARIABLES = ("TF_CONFIG", "CLUSTER_SPEC", "AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR",
                     "CLOUD_ML_JOB_ID", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "MLSUBMIT_EMULATE_DEVICES",
                     SPEC_VARIABLE)
INSTALL_FAILED, BAD_SPEC = 3, 2
LAUNCHER_SOURCE = None  # this file's text where it runs without a file (mlsubmit.launcher.shipped sets it)


class SpecError(ValueError):
    pass


# -- pure: what the service sets -------------------------------------------------------------------------------
def tasks_of(roles):
    """[(role, index)] of every replica in pool order, from [(role, count)]."""
    return [(role, i) for role, count in roles for i in range(int(count))]


def service_env(*, api, job_id, tier, roles, addresses, role, index, job_dir, args):
    """(env, args) of replica (role, index): CLOUD_ML_JOB_ID, CLUSTER_SPEC and AIP_* (Vertex AI), TF_CONFIG, and the
    arguments as the service passes them (legacy AI Platform appends --job-dir). `addresses` in `tasks_of` order."""
    tasks = tasks_of(roles)
    address = dict(zip(tasks, addresses))
    present = [r for r, count in roles]
    chief_key = "master" if api == "legacy" else "chief"
    cluster = {(chief_key if r == "chief" else r): [address[t] for t in tasks if t[0] == r]
               for r in ("chief", "worker", "ps") if r in present}
    counts = dict(roles)
    env = {"CLOUD_ML_JOB_ID": job_id}
    tf_config = {"cluster": cluster, "task": {"type": chief_key if role == "chief" else role, "index": index},
                 "environment": "cloud"}
    if api == "legacy":
        tf_config["job"] = {"job_name": job_id, "scale_tier": tier, **{
            f"{name}_count": counts.get(r, 0)
            for r, name in (("worker", "worker"), ("ps", "parameter_server"), ("evaluator", "evaluator"))}}
    else:
        pools = {POOL[r]: [address[t] for t in tasks if t[0] == r] for r in present}
        env["CLUSTER_SPEC"] = json.dumps({"cluster": pools, "environment": "cloud",
                                          "task": {"type": POOL[role], "index": index}})
        base = (job_dir or "").rstrip("/")
        if base:  # Vertex AI sets them only with a baseOutputDirectory
            env.update(AIP_MODEL_DIR=f"{base}/model/", AIP_CHECKPOINT_DIR=f"{base}/checkpoints/",
                       AIP_TENSORBOARD_LOG_DIR=f"{base}/logs/")
    env["TF_CONFIG"] = json.dumps(tf_config)
    args = (*args, "--job-dir", job_dir) if api == "legacy" and job_dir else tuple(args)
    return env, args


def coordinator_env(roles, addresses, role, index):
    """JAX / Keras distribution / torch.distributed variables: the processes are the chief and the workers (rank 0
    is the chief), the coordinator the chief's address. Empty for parameter servers and evaluators."""
    tasks = tasks_of(roles)
    members = [(t, a) for t, a in zip(tasks, addresses) if t[0] in ("chief", "worker")]
    ranks = {t: rank for rank, (t, _) in enumerate(members)}
    if (role, index) not in ranks or not members:
        return {}
    rank, world, chief = ranks[(role, index)], len(members), members[0][1]
    host, _, port = chief.rpartition(":")
    return {"JAX_COORDINATOR_ADDRESS": chief, "JAX_NUM_PROCESSES": str(world), "JAX_PROCESS_ID": str(rank),
            "KERAS_DISTRIBUTION_JOB_ADDRESSES": ",".join(a for _, a in members),
            "KERAS_DISTRIBUTION_NUM_PROCESSES": str(world), "KERAS_DISTRIBUTION_PROCESS_ID": str(rank),
            "MASTER_ADDR": host, "MASTER_PORT": port, "WORLD_SIZE": str(world), "RANK": str(rank),
            "LOCAL_RANK": "0"}


def locate(spec, environ):
    """(role, index) of this replica from the spec, or from $JOB_COMPLETION_INDEX (see the module docstring)."""
    roles = [(r, int(c)) for r, c in spec["roles"]]
    tasks = tasks_of(roles)
    role, index = spec.get("role"), spec.get("index")
    if role is not None and index is not None:
        pass
    elif "JOB_COMPLETION_INDEX" not in environ:
        raise SpecError("the spec names no role/index and $JOB_COMPLETION_INDEX is not set")
    else:
        given = int(environ["JOB_COMPLETION_INDEX"])
        if role is not None:
            index = given
        elif spec.get("offsets"):
            starts = sorted((int(first), r) for r, first in spec["offsets"].items())
            first, role = [(f, r) for f, r in starts if f <= given][-1]
            index = given - first
        else:
            if not 0 <= given < len(tasks):
                raise SpecError(f"JOB_COMPLETION_INDEX {given} is outside the job's {len(tasks)} replicas")
            role, index = tasks[given]
    if (role, int(index)) not in tasks:
        raise SpecError(f"{role}-{index} is not a replica of the job ({', '.join(f'{r}-{i}' for r, i in tasks)})")
    return role, int(index)


def operator_located(spec, environ):
    """The spec as is, or, when it says `"tf_config": "env"` (a Kubeflow TFJob, whose operator sets TF_CONFIG), with
    this replica's role and index and every address taken from the operator's $TF_CONFIG (evaluators, which that
    cluster leaves out, get a placeholder address nobody dials)."""
    if spec.get("tf_config") != "env":
        return spec
    try:
        given = json.loads(environ["TF_CONFIG"])
        task, cluster = given["task"], given["cluster"]
    except (KeyError, ValueError, TypeError):
        raise SpecError('the spec says "tf_config": "env" (a TFJob) but $TF_CONFIG is missing or has no task and '
                        "cluster: is the Training Operator running the pod?") from None
    addresses = []
    for role, index in tasks_of(spec["roles"]):
        hosts = cluster.get(role) or (cluster.get("master", []) if role == "chief" else [])
        addresses.append(hosts[index] if index < len(hosts) else f"{spec['job_id']}-{role}-{index}:2222")
    role = "chief" if task["type"] in ("chief", "master") else task["type"]
    return {**{k: v for k, v in spec.items() if k != "address_pattern"}, "role": role, "index": int(task["index"]),
            "addresses": addresses}


def addresses_of(spec):
    """Every replica's address in `tasks_of` order: the spec's list, or its pattern filled in."""
    tasks = tasks_of(spec["roles"])
    if spec.get("addresses"):
        if len(spec["addresses"]) != len(tasks):
            raise SpecError(f"{len(tasks)} replicas need {len(tasks)} addresses; received {len(spec['addresses'])}")
        return list(spec["addresses"])
    pattern = spec.get("address_pattern")
    if not pattern:
        raise SpecError("the spec needs `addresses` or `address_pattern`")
    return [pattern.format(job=spec["job_id"], role=r, index=i, rank=n) for n, (r, i) in enumerate(tasks)]


def check_spec(spec):
    if not isinstance(spec, dict):
        raise SpecError(f"the spec must be a JSON object; received {type(spec).__name__}")
    for key in ("job_id", "roles", "module"):
        if not spec.get(key):
            raise SpecError(f"the spec has no {key!r}")
    roles = [r for r, _ in spec["roles"]]
    if not roles or roles[0] != "chief" or any(r not in ROLE_ORDER for r in roles):
        raise SpecError(f"roles must start with the chief and be among {', '.join(ROLE_ORDER)}; received {roles}")
    if spec.get("api", "vertex") not in ("vertex", "legacy"):
        raise SpecError(f"api must be vertex or legacy; received {spec.get('api')!r}")
    if not all(isinstance(a, str) for a in spec.get("args", [])):
        raise SpecError("args must be a list of strings")
    return spec


def replica_env(spec, role, index, environ):
    """(the module's full environment, its arguments) for replica (role, index) on a node whose environment is
    `environ`: the node's own (minus what the service sets), the service's, the coordinator's, then the job's."""
    addresses = addresses_of(spec)
    env, args = service_env(api=spec.get("api", "vertex"), job_id=spec["job_id"], tier=spec.get("tier") or "CUSTOM",
                            roles=[(r, int(c)) for r, c in spec["roles"]], addresses=addresses, role=role,
                            index=index, job_dir=spec.get("job_dir"), args=spec.get("args", []))
    base = {k: v for k, v in environ.items() if k not in SERVICE_VARIABLES}
    base.update(PYTHONUNBUFFERED="1", PYTHONSAFEPATH="1", PYTHONNOUSERSITE="1")
    base.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    coordinator = coordinator_env(spec["roles"], addresses, role, index) if spec.get("coordinator", True) else {}
    full = {**base, **env, **coordinator, **{str(k): str(v) for k, v in (spec.get("env") or {}).items()}}
    if full.get("CLOUD_ML_TRIAL_ID"):  # a tuning trial's replica: TF_CONFIG's task says which trial, as the service's
        tf_config = json.loads(full["TF_CONFIG"])
        tf_config["task"]["trial"] = full["CLOUD_ML_TRIAL_ID"]
        full["TF_CONFIG"] = json.dumps(tf_config)
    return full, args


# -- packages -------------------------------------------------------------------------------------------------
def _gcs_token(environ):
    import urllib.request  # here, not at the top: a replica without packages to fetch starts faster

    if environ.get("GOOGLE_OAUTH_ACCESS_TOKEN"):
        return environ["GOOGLE_OAUTH_ACCESS_TOKEN"]
    host = environ.get("GCE_METADATA_HOST", "metadata.google.internal")
    request = urllib.request.Request(
        f"http://{host}/computeMetadata/v1/instance/service-accounts/default/token",
        headers={"Metadata-Flavor": "Google"})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return json.load(answer)["access_token"]
    except (OSError, ValueError, KeyError):
        return None


def fetch(uri, into, environ):
    """A local copy of package `uri` inside directory `into` (local paths are used where they are). A package
    shipped inside the spec is {"name": FILE, "data": BASE64}."""
    import urllib.parse
    import urllib.request

    if isinstance(uri, dict):
        import base64

        target = os.path.join(into, os.path.basename(uri["name"]))
        with open(target, "wb") as out:
            out.write(base64.b64decode(uri["data"]))
        return target
    if uri.startswith("file://"):
        return urllib.parse.unquote(urllib.parse.urlparse(uri).path)
    if not uri.startswith("gs://"):
        return uri
    bucket, _, name = uri[len("gs://"):].partition("/")
    mounted = os.path.join("/gcs", bucket, name)
    if os.path.isfile(mounted):  # Cloud Storage FUSE, as Vertex AI mounts it
        return mounted
    endpoint = (environ.get("STORAGE_EMULATOR_HOST") or "https://storage.googleapis.com").rstrip("/")
    if "://" not in endpoint:
        endpoint = f"http://{endpoint}"
    url = f"{endpoint}/storage/v1/b/{urllib.parse.quote(bucket, safe='')}/o/{urllib.parse.quote(name, safe='')}" \
          "?alt=media"
    headers = {}
    token = None if environ.get("STORAGE_EMULATOR_HOST") else _gcs_token(environ)
    if token:
        headers["Authorization"] = f"Bearer {token}"
    target = os.path.join(into, os.path.basename(name) or "package")
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as answer, \
            open(target, "wb") as out:
        shutil.copyfileobj(answer, out)
    return target


def sha256_of(path):
    import hashlib

    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def venv_key(digests, python_version=None, environment=None):
    """The name of the venv holding packages `digests` made by the Python of `environment` (its sys.prefix: two
    Pythons of one node never share a venv, whose base interpreter and site packages are the maker's)."""
    import hashlib

    python_version = python_version or tuple(sys.version_info[:2])
    parts = [*digests, *([environment] if environment else [])]
    key = parts[0] if len(parts) == 1 else hashlib.sha256("".join(parts).encode()).hexdigest()
    return f"{key[:16]}-py{python_version[0]}{python_version[1]}"


def _create_venv(path):
    """A venv at `path` made by this node's Python as it comes (its pip, with or without setuptools and wheel)."""
    import importlib.util
    import site
    import venv

    try:
        venv.EnvBuilder(system_site_packages=True, with_pip=importlib.util.find_spec("pip") is None,
                        symlinks=os.name != "nt").create(path)
    except (subprocess.CalledProcessError, OSError) as err:  # no ensurepip (Debian's python3 without python3-venv)
        raise RuntimeError(f"this node's Python {_this_python()} could not make a venv with pip for the packages "
                           f"({err}): install pip and venv into it (python3-pip, python3-venv)") from None
    python = os.path.join(path, "bin", "python")
    if sys.prefix != sys.base_prefix:  # this node's Python is itself a venv: let the new one see its packages
        purelib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 capture_output=True, text=True, check=True, env=_pip_env()).stdout.strip()
        with open(os.path.join(purelib, "_mlsubmit_node_site.pth"), "w") as handle:
            handle.writelines(f"import site; site.addsitedir({p!r})\n" for p in site.getsitepackages())
    return python


def _this_python():
    return "%d.%d (%s)" % (sys.version_info[0], sys.version_info[1], sys.executable)


def _pip_env():
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


# How pip (23.0 to 26.3 seen) says it could not put a build requirement (setuptools, wheel) into an isolated build
# environment: "Installing build dependencies: finished with status 'error'", "× pip subprocess to install build
# dependencies did not run successfully" ("backend dependencies": what setuptools asks for once it runs).
BUILD_DEPS_FAILED = r"install(?:ing)? (?:build|backend) dependencies(?:: finished with status 'error'| did not run)"


def pip_reason(output):
    """What pip said went wrong, as one line: its `ERROR:` / `error:` / `×` lines (the last six), else its last
    lines."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    said = [line for line in lines if line.startswith(("ERROR:", "error:", "\u00d7"))
            and line != "error: subprocess-exited-with-error"]
    picked = []
    for line in said or lines[-6:]:
        if line not in picked:
            picked.append(line)
    return " | ".join(picked[-6:])


def build_backend_of(python):
    """(setuptools version or None, whether `wheel` imports) in interpreter `python`."""
    probe = ("try:\n import setuptools; v = setuptools.__version__\nexcept Exception:\n v = ''\n"
             "try:\n import wheel; w = 1\nexcept Exception:\n w = 0\nprint('%s %d' % (v, w))")
    said = subprocess.run([python, "-c", probe], capture_output=True, text=True, env=_pip_env()).stdout.split()
    return (said[0] if len(said) == 2 else None), said[-1:] == ["1"]


def builds_without_isolation(setuptools_version, has_wheel):
    """Whether setuptools can build a wheel with nothing fetched: 70.1 and later have bdist_wheel themselves, older
    ones need the `wheel` package (without it: "invalid command 'bdist_wheel'")."""
    if not setuptools_version:
        return False
    import re

    numbers = [int(n) for n in re.findall(r"\d+", setuptools_version)[:2]] + [0]
    return has_wheel or (numbers[0], numbers[1]) >= (70, 1)


def _pip_install(python, args, cwd):
    return subprocess.run([python, "-m", "pip", "install", "--disable-pip-version-check", "--no-input", *args],
                          capture_output=True, text=True, env=_pip_env(), cwd=cwd)


def pip_install(python, items, cwd, say, names):
    """`pip install items` into `python`'s venv as the cloud's `pip install` runs: sdists built in an isolated
    environment with the build requirements they declare, fetched from the node's package index. Only when that
    fetch fails (no index reachable, none with a setuptools for this Python) is the node's own setuptools used
    (`--no-build-isolation`), and only if it can build a wheel; otherwise RuntimeError says so in one line."""
    import re

    done = _pip_install(python, items, cwd)
    output = done.stderr + done.stdout
    if done.returncode != 0 and re.search(BUILD_DEPS_FAILED, output, re.I):
        inner = [line.strip() for line in output.split("[end of output]")[0].splitlines()]
        fetched = " | ".join([line for line in inner if line.startswith("ERROR:")][-2:]) or "no answer"
        setuptools_version, has_wheel = build_backend_of(python)
        if not builds_without_isolation(setuptools_version, has_wheel):
            has = f"setuptools {setuptools_version} without the wheel package" if setuptools_version else \
                "no setuptools"
            raise RuntimeError(
                f"pip could not install {names}: it could not fetch the build requirements from this node's "
                f"package index ({fetched}), and this node's Python {_this_python()} cannot build without them (it "
                f"has {has}; setuptools before 70.1 builds wheels only with wheel installed): give the nodes a "
                f"package index they can reach (pip.conf, PIP_INDEX_URL), or install setuptools>=70.1 into that "
                f"Python")
        say(f"no build requirements from a package index ({fetched}); building with this node's setuptools "
            f"{setuptools_version} (--no-build-isolation)")
        done = _pip_install(python, ["--no-build-isolation", *items], cwd)
        output = done.stderr + done.stdout
    if done.returncode != 0:
        raise RuntimeError(f"pip could not install {names} (exit code {done.returncode}): {pip_reason(output)}")


def installed_python(packages, cache_dir, say, requirements=()):
    """The python of a venv holding `requirements` (what the job's image adds) and `packages` (installed in order,
    with their requirements, as the cloud does: `pip_install`), kept under `cache_dir` by their sha256 and built
    once per node (a lock; built aside, renamed into place). Raises RuntimeError, one line, when they do not
    install."""
    import fcntl
    import hashlib

    digests = [sha256_of(p) for p in packages]
    if requirements:
        digests.append(hashlib.sha256("\n".join(requirements).encode()).hexdigest())
    key = venv_key(digests, environment=sys.prefix)
    os.makedirs(cache_dir, exist_ok=True)
    final = os.path.join(cache_dir, key)
    python = os.path.join(final, "bin", "python")
    with open(os.path.join(cache_dir, f"{key}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # replicas of one node wait for one install
        if os.path.exists(python):
            say(f"packages already installed in {final}")
            return python
        building = tempfile.mkdtemp(prefix=f".{key}-", dir=cache_dir)
        try:
            with open(os.path.join(building, ".mlsubmit-owned"), "w") as mark:  # mlsubmit.cache.ownership's mark
                mark.write(json.dumps({"kind": "launcher-venv", "created": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                                        time.gmtime()),
                                       "by": "mlsubmit"}) + "\n")
            pip_install(_create_venv(building), [*requirements, *packages], building, say,
                        ", ".join(map(os.path.basename, packages)))
            os.rename(building, final)
        finally:
            shutil.rmtree(building, ignore_errors=True)
    say(f"packages installed with their requirements into {final}")
    return python


# -- running ----------------------------------------------------------------------------------------------------
def _die_with_parent():  # pragma: no cover - in the child between fork and exec
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def python_version(python):
    """(major, minor) of interpreter `python`: its venv's pyvenv.cfg, else asked (this one's when it is this one)."""
    import re

    if os.path.realpath(python) == os.path.realpath(sys.executable):
        return tuple(sys.version_info[:2])
    try:
        with open(os.path.join(os.path.dirname(os.path.dirname(python)), "pyvenv.cfg"), encoding="utf-8") as cfg:
            found = re.search(r"^version(?:_info)?\s*=\s*(\d+)\.(\d+)", cfg.read(), re.M)
        if found:
            return int(found[1]), int(found[2])
    except OSError:
        pass
    said = subprocess.run([python, "-c", "import sys; print('%d %d' % sys.version_info[:2])"], capture_output=True,
                          text=True, timeout=60).stdout.split()
    return int(said[0]), int(said[1])


def module_command(python, module):
    """`python -m module` such that the working directory never shadows the installed package: PYTHONSAFEPATH
    from Python 3.11 on, RUN_MODULE_UNSHADOWED before."""
    if python_version(python) >= (3, 11):
        return [python, "-m", module]
    return [python, "-c", RUN_MODULE_UNSHADOWED, module]


def _reachable(address, timeout=1.0):
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


class Replica:
    """The module's process for one replica, its lines, and the reasons it may be stopped early."""

    def __init__(self, spec, role, index, out):
        self.spec, self.role, self.index, self.out = spec, role, index, out
        self.name = f"{role}-{index}"
        self.chief_done = threading.Event()
        self.stop_now = threading.Event()
        self.signalled = False  # SIGTERM reached the launcher
        self.process = None
        self.control = None
        self._lock = threading.Lock()

    def emit(self, line):
        with self._lock:
            if self.control is not None:
                try:
                    self.control.sendall((json.dumps({"line": line}) + "\n").encode())
                except OSError:
                    self.stop_now.set()
            self.out.write(line + "\n")
            self.out.flush()

    def say(self, text, error=False):
        if error or not self.spec.get("quiet"):
            self.emit(f"[launcher] {text}")

    def connect(self):
        address = self.spec.get("control")
        if not address:
            return
        host, _, port = address.rpartition(":")
        self.control = socket.create_connection((host, int(port)), timeout=10)
        self.control.settimeout(None)
        self.control.sendall((json.dumps({"hello": self.name, "token": self.spec.get("token", "")}) + "\n").encode())
        threading.Thread(target=self._listen, daemon=True).start()

    def _listen(self):
        for raw in self.control.makefile("r", encoding="utf-8", errors="replace"):
            try:
                message = json.loads(raw)
            except ValueError:
                continue
            if message.get("chief_done"):
                self.chief_done.set()
            if message.get("stop"):
                self.stop_now.set()
        self.stop_now.set()  # the submitting side is gone: nothing may outlive it

    def watch_chief(self):
        chief = addresses_of(self.spec)[0]
        seen, gone_since = False, None
        limit = float(self.spec.get("chief_gone_seconds", 10))
        while not self.chief_done.is_set() and self.process.poll() is None:
            up = _reachable(chief)
            seen = seen or up
            gone_since = None if up else (gone_since or time.monotonic())
            if seen and gone_since and time.monotonic() - gone_since >= limit:
                self.chief_done.set()
            time.sleep(1.0)

    def run(self, python, args, env, cwd):
        self.process = subprocess.Popen(
            [*module_command(python, self.spec["module"]), *args], env={**env, "PWD": cwd}, cwd=cwd,
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace",
            bufsize=1, start_new_session=not self.spec.get("same_group"),
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
        reader = threading.Thread(target=self._read, daemon=True)
        reader.start()
        if self.role != "chief" and self.spec.get("watch_chief", not self.spec.get("control")):
            threading.Thread(target=self.watch_chief, daemon=True).start()
        grace = float(self.spec.get("evaluator_grace_seconds" if self.role == "evaluator" else "grace_seconds",
                                    120 if self.role == "evaluator" else 15))
        chief_ended_at = None
        while self.process.poll() is None:
            if self.stop_now.is_set():
                self.say(f"{self.name} stopped: the job was cancelled or its submitter went away")
                self.stop()
                reader.join(5)
                return 143
            if self.chief_done.is_set() and chief_ended_at is None:
                chief_ended_at = time.monotonic()
            if chief_ended_at is not None and time.monotonic() - chief_ended_at > grace:
                self.say(f"the chief has ended; {self.name} stopped after {grace:.0f} s, as the service stops it")
                self.stop()
                reader.join(5)
                return 0
            try:
                self.process.wait(0.1)  # returns as soon as the module ends
            except subprocess.TimeoutExpired:
                pass
        reader.join(5)
        return self.process.returncode

    def _read(self):
        for line in iter(lambda: self.process.stdout.readline(MAX_LINE), ""):  # bounded, whatever the module prints
            self.emit(line.rstrip("\n"))

    def stop(self, seconds=5.0):
        if self.spec.get("same_group"):  # our own group: whoever signalled it signalled the module too
            if not self.signalled:
                self.process.terminate()
            try:
                self.process.wait(seconds)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.process.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.process.wait(seconds)
                if sig == signal.SIGTERM:
                    os.killpg(self.process.pid, signal.SIGKILL)  # what it started in its group
                return
            except subprocess.TimeoutExpired:
                continue
            except (ProcessLookupError, PermissionError):
                return


def default_cache_dir(environ):
    home = environ.get("MLSUBMIT_HOME") or os.path.join(os.path.expanduser("~"), ".mlsubmit")
    return os.path.join(home, "launcher")


def run_replica(spec, out=None, environ=None):
    """Run one replica of `spec` to its end; returns its exit status (see the module docstring)."""
    out = out or sys.stdout
    environ = dict(os.environ if environ is None else environ)
    spec = operator_located(check_spec(spec), environ)
    role, index = locate(spec, environ)
    replica = Replica(spec, role, index, out)
    replica.connect()
    own = spec.get("workdir")
    work = own or tempfile.mkdtemp(prefix=f"{spec['job_id']}-{role}-{index}-", dir=spec.get("work_root"))
    if own:
        os.makedirs(own, exist_ok=True)

    def on_sigterm(*_):
        replica.signalled = True
        replica.stop_now.set()

    previous = signal.signal(signal.SIGTERM, on_sigterm) \
        if threading.current_thread() is threading.main_thread() else None
    try:
        code = _launch(replica, spec, role, index, environ, work)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if not own and not spec.get("keep_workdir"):
            shutil.rmtree(work, ignore_errors=True)
    # the exit status goes to the submitting side only once the folder is gone: an engine that ends the node's
    # process as soon as it has every status (Ray kills its actors) would otherwise leave the folder behind
    return _finish(replica, code)


def _launch(replica, spec, role, index, environ, work):
    env, args = replica_env(spec, role, index, environ)
    packages = [fetch(uri, work, environ) for uri in spec.get("packages", [])]
    python = spec.get("python") or sys.executable
    if packages:
        try:
            python = installed_python(packages, spec.get("cache_dir") or default_cache_dir(environ), replica.say,
                                      [str(r) for r in spec.get("requirements") or ()])
        except RuntimeError as err:
            replica.say(str(err), error=True)
            return INSTALL_FAILED
    replica.say(f"{replica.name} starts python -m {spec['module']} in {work}")
    return replica.run(python, args, env, work)


def _finish(replica, code):
    if replica.control is not None:
        try:
            replica.control.sendall((json.dumps({"exit": code}) + "\n").encode())
            replica.control.close()
        except OSError:
            pass
    return code


def read_spec(argv, environ):
    if len(argv) >= 2 and argv[0] == "--spec":
        return json.loads(argv[1])
    if argv:
        with open(argv[0], encoding="utf-8") as handle:
            return json.load(handle)
    if environ.get(SPEC_VARIABLE):
        return json.loads(environ[SPEC_VARIABLE])
    raise SpecError(f"no spec: give a JSON file, --spec JSON, or ${SPEC_VARIABLE}")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if sys.version_info < (3, 8):
        print("[launcher] error: the launcher needs Python 3.8 or later; this node's is %d.%d (%s)"
              % (sys.version_info[0], sys.version_info[1], sys.executable), file=sys.stderr)
        return BAD_SPEC
    try:
        sys.stdout.reconfigure(errors="replace")  # whatever the module printed reaches the reader
        spec = read_spec(argv, os.environ)
        code = run_replica(spec)
        if code < 0:  # the module was killed by a signal: so is the launcher, for whoever waits on it
            if -code not in (signal.SIGKILL, signal.SIGSTOP):
                signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
        return code
    except (SpecError, ValueError, KeyError, TypeError, OSError) as err:
        print(f"[launcher] error: {err}", file=sys.stderr)
        return BAD_SPEC



# -- for the targets: run on the node that an engine placed a replica on -----------------------------------------
def free_port():
    """A port of this node that could be bound just now (the engine gathers them into the replicas' addresses)."""
    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def run_in_subprocess(spec):
    """Run the launcher for `spec` (a dict) in a child process of this one, tied to it (it dies with this process),
    its lines going to the spec's `control` address; returns its exit status. What a Spark task, a Dask task or a
    Ray actor calls: the work happens in the child, so the engine's own process stays responsive."""
    text = LAUNCHER_SOURCE or open(__file__, encoding="utf-8").read()
    env = {k: v for k, v in os.environ.items() if k != SPEC_VARIABLE}
    env[SPEC_VARIABLE] = json.dumps(spec)
    python = sys.executable
    if spec.get("node_python"):
        python = shutil.which(spec["node_python"])
        if python is None:
            raise RuntimeError(f"the job's node Python {spec['node_python']!r} (MLSUBMIT_NODE_PYTHON) is not an "
                               f"executable on {socket.gethostname()}")
    process = subprocess.Popen([python, "-c", text], env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, errors="replace",
                               start_new_session=True,
                               preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)
    try:
        _, err = process.communicate()
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    if process.returncode == BAD_SPEC and err:
        raise RuntimeError(err.strip().splitlines()[-1])
    return process.returncode


if __name__ == "__main__":
    sys.exit(main())
