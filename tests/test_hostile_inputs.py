"""Hostile and careless input, each with the exact one line a user reads on stderr (exit code 2, nothing written).

The table runs the real CLI in-process through typer's CliRunner; the cases where the process itself matters
(stderr of a command that imports TensorFlow, credentials that cannot refresh) run it as a subprocess.
"""

from __future__ import annotations

import os
import shlex
import stat
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mlsubmit.cli import app


def _bomb(levels: int = 9) -> str:
    """A ~1 KB "billion laughs": each anchor is a list of ten aliases of the one before."""
    lines = ["  l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "trainingInput:\n  scaleTier: BASIC\nlaughs:\n" + "\n".join(lines) + "\n"


def _chain(aliases: int = 2000) -> str:
    """The issue's case: 2,000 aliases, each a list holding the previous one twice (~100 KB)."""
    lines = ["  c0: &c0 [1, 1]"] + [f"  c{i}: &c{i} [*c{i - 1}, *c{i - 1}]" for i in range(1, aliases)]
    return "trainingInput:\n  scaleTier: BASIC\nchain:\n" + "\n".join(lines) + "\n"


def _strings(key: str = "trainingInput:\n  scaleTier: BASIC\n  args", copies: int = 2000) -> str:
    """The issue's case: one 100 KB string and 2,000 aliases of it, 108 KB that expand to 200 MB of text."""
    return f"{key}: [&a {'x' * 100_000}, {', '.join(['*a'] * copies)}]\n"


def _amplified() -> str:
    """A 500 KB legacy config whose args land in each of the four Vertex AI worker pools: 2 MB once converted."""
    pools = "".join(f"  {role}Type: n1-standard-4\n" for role in ("master", "worker", "parameterServer", "evaluator"))
    args = ", ".join(["a" * 1000] * 500)
    return (f"trainingInput:\n  scaleTier: CUSTOM\n{pools}  workerCount: 2\n  parameterServerCount: 1\n"
            f"  evaluatorCount: 1\n  pythonModule: trainer.task\n  args: [{args}]\n")


FILES: dict[str, bytes] = {
    "latin1.yaml": "trainingInput:\n  scaleTier: BASIC\n  jobDir: gs://b/d\u00e9j\u00e0\n".encode("latin-1"),
    "binary.yaml": bytes(range(256)),
    "deep.yaml": b"trainingInput:\n  args: " + b"[" * 1000 + b"]" * 1000 + b"\n",
    "bomb.yaml": _bomb().encode(),
    "chain.yaml": _chain().encode(),
    "recursive.yaml": b"trainingInput: &t\n  scaleTier: BASIC\n  nested: *t\n",
    "dup.yaml": b"trainingInput:\n  scaleTier: CUSTOM\n  masterType: n1-standard-4\n  scaleTier: BASIC\n",
    "dup_nested.yaml": b"workerPoolSpecs:\n- machineSpec:\n    machineType: n1-standard-4\n    machineType: n1-standard-8\n",
    "strings.yaml": _strings().encode(),
    "tuning_strings.yaml": _strings("hyperparameters:\n  goal: MAXIMIZE\n  params").encode(),
    "amplified.yaml": _amplified().encode(),
    "digits.yaml": b"trainingInput:\n  workerCount: " + b"9" * 5000 + b"\n",
    "base60.yaml": b"trainingInput:\n  args: [" + b"1:" * 100_000 + b"1]\n",  # YAML 1.1: quadratic to build
    "date.yaml": b"trainingInput:\n  jobDir: 2024-13-45\n",
    "flat.yaml": b"trainingInput:\n  args: [" + b",".join([b"1"] * 780_000) + b"]\n",  # 1.5 MiB, no alias
    "upper_image.yaml": b"workerPoolSpecs:\n- machineSpec: {machineType: n1-standard-4}\n  replicaCount: 1\n"
                        b"  containerSpec: {imageUri: 'gcr.io/x/Y:1'}\n",
    "legacy_image.yaml": b"trainingInput:\n  scaleTier: BASIC\n  masterConfig: {imageUri: 'gcr.io/x/y:1 && rm -rf ~'}\n",
    "anchors_ok.yaml": b"workerPoolSpecs:\n- machineSpec: &m {machineType: n1-standard-4}\n  replicaCount: 1\n"
                       b"- machineSpec:\n    <<: *m\n    machineType: n1-standard-8\n  replicaCount: 2\n",
}
STRINGS = ("invalid YAML in {flag} {file} at line 3, column {column}: its aliases expand it to more than 1572864 "
           "bytes of text (1.5 MiB, the API's request size limit); every use of an alias counts: repeat long values "
           "less often")
SHORTEN = "shorten the trainer args and env values, or pass large settings to the trainer as a file in Cloud Storage"
BIG = 10 * 1024 * 1024  # the 10 MB document, made sparse so the test costs no disk time
INT64 = "9223372036854775807"
LONG = "a" * 100_000
TIERS = "BASIC, STANDARD_1, PREMIUM_1, BASIC_GPU, BASIC_TPU, CUSTOM"
REGIONS = ("asia-east1, asia-northeast1, asia-southeast1, europe-west1, europe-west4, us-central1, us-east1, "
           "us-east4, us-west1, us-west4")
IMAGE_REF = "an image reference [HOST[:PORT]/]PATH[:TAG][@DIGEST] (the OCI distribution grammar)"
IMAGE_FIX = "e.g. us-docker.pkg.dev/PROJECT/REPOSITORY/IMAGE:TAG"

CASES = [
    # YAML: encoding, nesting, amplification, size, duplicate keys
    ("config --config latin1.yaml", "invalid --config latin1.yaml: not UTF-8 text (byte 0xe9 at offset 52); "
     "expected a UTF-8 YAML file; save it as UTF-8"),
    ("config --config binary.yaml", "invalid --config binary.yaml: not UTF-8 text (byte 0x80 at offset 128); "
     "expected a UTF-8 YAML file; save it as UTF-8"),
    ("config --config deep.yaml", "invalid YAML in --config deep.yaml at line 2, column 107: nested deeper than "
     "100 levels; a job config is a few levels deep: check the file"),
    ("config --config bomb.yaml", "invalid YAML in --config bomb.yaml at line 8, column 47: its aliases expand it "
     "to more than 100000 nodes; write the values out instead of nesting aliases"),
    ("config --config chain.yaml", "invalid YAML in --config chain.yaml at line 18, column 20: its aliases expand "
     "it to more than 100000 nodes; write the values out instead of nesting aliases"),
    ("config --config recursive.yaml", "invalid YAML in --config recursive.yaml at line 3, column 11: an alias "
     "refers to the node that holds it (a recursive document); write the values out instead"),
    ("config --config big.yaml", "invalid --config big.yaml: larger than 1572864 bytes; expected at most 1.5 MiB "
     "(the API's request size limit); a job config is a few KB: check the file"),
    # bounded by what they expand to: the 108 KB file of 200 MB, in --config and in --hptune-config
    ("config --config strings.yaml", STRINGS.format(flag="--config", file="strings.yaml", column=100071)),
    ("config --hptune-config tuning_strings.yaml", STRINGS.format(flag="--hptune-config", file="tuning_strings.yaml",
                                                                  column=100073)),
    # numbers PyYAML would build slowly, or fail to build with a traceback
    ("config --config digits.yaml", "invalid YAML in --config digits.yaml at line 2, column 16: an integer of 5000 "
     "characters; expected at most 100 (the APIs' numbers are int64: 19 digits); quote it if it is text"),
    ("config --config base60.yaml", "invalid YAML in --config base60.yaml at line 2, column 10: an integer of 200001 "
     "characters; expected at most 100 (the APIs' numbers are int64: 19 digits); quote it if it is text"),
    ("config --config date.yaml", "invalid YAML in --config date.yaml at line 2, column 11: cannot read '2024-13-45' "
     "as a timestamp: month must be in 1..12; quote it if it is text"),
    # a document that outgrows the request limit on the way: args copied into four worker pools
    ("config --config amplified.yaml", "invalid job: the generated config, as the request gcloud sends, would be "
     f"2007253 bytes; expected at most 1572864 (1.5 MiB, the API's request size limit); {SHORTEN}"),
    (["config", *(f"--env=V{i}={'x' * 120_000}" for i in range(14))], "invalid job: the generated config, as "
     f"the request gcloud sends, would be 1680682 bytes; expected at most 1572864 (1.5 MiB, the API's request size "
     f"limit); {SHORTEN}"),
    ("config " + " ".join(f"--label k{i}=v" for i in range(64)), "invalid value for --label: received '64 labels'; "
     "expected at most 63 (a job takes 64; mlsubmit adds its request-id label)"),
    ("config " + " ".join(f"--env V{i}=1" for i in range(101)), "invalid value for --env: received '101 variables'; "
     "expected at most 100 (the API's limit); pass settings to the trainer in one file or argument instead"),
    ("train --local --backends " + ",".join(["jax"] * 20_000 + ["nope"]), "invalid value for --backends: received "
     "'nope'; expected one of tensorflow, jax, torch"),
    ("config --config dup.yaml", "invalid YAML in --config dup.yaml at line 4, column 3: duplicate key 'scaleTier' "
     "(first at line 2); keep one of them: YAML would silently use the last"),
    ("config --config dup_nested.yaml", "invalid YAML in --config dup_nested.yaml at line 4, column 5: duplicate "
     "key 'machineType' (first at line 3); keep one of them: YAML would silently use the last"),
    ("config --config .", "invalid value for --config: received '.'; expected a readable YAML file; Is a directory"),
    # numbers: beyond int64, Unicode digits, what the user typed
    ("config --workers 99999999999999999999999", "invalid value for --workers: received '99999999999999999999999'; "
     f"expected a whole number from 0 to {INT64} (int64)"),
    ("config --max-runtime 99999999999999999999d", "invalid value for --max-runtime: received "
     "'99999999999999999999d'; expected a duration of at most 315576000000s (the API's limit)"),
    ("config --workers \u0663", "invalid value for --workers: received '\u0663'; expected a whole number >= 0"),
    ("config --gpus \uff12", "invalid value for --gpus: received '\uff12'; expected a whole number >= 0"),
    ("config --max-runtime \u0663h", "invalid value for --max-runtime: received '\u0663h'; expected a duration such "
     "as 7200s, 90m, 2h or 1h30m"),
    ("predict m.keras -i x.npz -w 1e400", "invalid value for --weights: received '1e400'; expected finite weights "
     "≥ 0; 1e400 is not; use 0 to leave a model out"),
    ("predict m.keras m.keras -i x.npz -w 1,nan", "invalid value for --weights: received '1,nan'; expected "
     "accuracy, equal, or one comma-separated number per model such as 0.5,0.3,0.2"),
    ("predict m.keras -i x.npz -w \u0663", "invalid value for --weights: received '\u0663'; expected accuracy, "
     "equal, or one comma-separated number per model such as 0.5,0.3,0.2"),
    ("predict m.keras -i x.npz --batch-size \u0663", "invalid value for --batch-size: received '\u0663'; expected "
     "auto or a whole number ≥ 1 (rows per batch)"),
    ("jobs list --limit \u00b2 --project p --region us-central1 --endpoint http://127.0.0.1:9",
     "invalid value for --limit: received '\u00b2'; expected a whole number from 1 to 10000"),
    ("train --local --start-port \u0663\u0663\u0663\u0663", "invalid value for --start-port: received "
     "'\u0663\u0663\u0663\u0663'; expected a port number from 1024 to 65535"),
    ("train --dry-run --project p --region us-central1 --staging-bucket gs://b\u00fccket", "invalid value for "
     "--staging-bucket: received 'gs://b\u00fccket'; expected gs://BUCKET[/PREFIX] with a valid bucket name; write "
     "it as gs://BUCKET/PREFIX"),
    # text no file system or API takes: one line all the same
    ("config --label 'a\nb'", "invalid value for --label: received 'a\\nb'; expected KEY=VALUE; write --label "
     "a\\nb=VALUE"),
    ("config --config 'a\x00b'", "invalid value for --config: received 'a\\x00b'; expected a readable YAML file; "
     "embedded null byte"),
    (f"predict {'a' * 300} -i x.npz", f"invalid path: received '{'a' * 60}…' (300 characters); expected a file name "
     "the file system can hold (at most 255 bytes a part, 4096 in all): File name too long"),
    ("jobs describe j\udcff --project p --region us-central1 --endpoint http://127.0.0.1:9", "invalid text: "
     "received 'display_name=\"j\\udcff\"', which holds '\\udcff'; expected UTF-8 text; retype it, or check the "
     "terminal's encoding"),
    # a value typed (or pasted) by mistake: its start and its length, however long; its control characters escaped
    (["config", "--label", LONG], f"invalid value for --label: received '{LONG[:60]}…' (100,000 characters); "
     f"expected KEY=VALUE; write --label {LONG[:60]}…=VALUE"),
    (["config", "--tier", "x\n" * 50_000], "invalid value for --tier: received '" + "x\\n" * 30 + "…' (100,000 "
     f"characters); expected one of {TIERS}"),
    (["train", "--dry-run", "--project", "p", "--region", "us-central1", "--staging-bucket", LONG], "invalid value "
     f"for --staging-bucket: received '{LONG[:60]}…' (100,000 characters); expected gs://BUCKET[/PREFIX] with a "
     "valid bucket name; write it as gs://BUCKET/PREFIX"),
    (["jobs", "describe", "j", "--project", "p", "--region", "us-central1", "--endpoint", LONG], "invalid value for "
     f"--endpoint: received '{LONG[:60]}…' (100,000 characters); expected http(s)://HOST[:PORT] of the "
     "training-service API; for the emulator: --endpoint http://127.0.0.1:8090"),
    (["predict", "m.keras", "-i", "x.npz", "--batch-size", LONG], f"invalid value for --batch-size: received "
     f"'{LONG[:60]}…' (100,000 characters); expected auto or a whole number ≥ 1 (rows per batch)"),
    (["config", "--label", "a\rb\x1b[31mc\u2028d\x85e"], r"invalid value for --label: received "
     r"'a\rb\x1b[31mc\u2028d\x85e'; expected KEY=VALUE; write --label a\rb\x1b[31mc\u2028d\x85e=VALUE"),
    (["config", f"--{LONG}"], f"unknown option --{LONG[:58]}… (100,002 characters) for `mlsubmit config`; see "
     "`mlsubmit config --help`"),
    ([LONG], f"unknown command '{LONG[:60]}…' (100,000 characters) for `mlsubmit`; expected one of train, config, "
     "package, emulator, predict, jobs, cache; see `mlsubmit --help`"),
    (f"config -o {'a' * 300}", f"invalid value for --output: received '{'a' * 60}…' (300 characters); expected a "
     "file name this system can open; File name too long"),
    ("config -o .", "invalid value for --output: received '.'; expected a file name, not a directory; e.g. -o "
     "job.yaml"),
    # image references outside the OCI distribution grammar, or over a registry's 255 characters: one check for
    # every image flag (config, train, package, --dry-run or not) and every image a YAML names
    ("config --executor-image 'gcr.io/x/y:1;touch /tmp/INJECTED'", "invalid value for --executor-image: received "
     f"'gcr.io/x/y:1;touch /tmp/INJECTED'; expected {IMAGE_REF}: ';' is not a character of image references; "
     f"{IMAGE_FIX}"),
    (["config", "--executor-image", "gcr.io/x/" + "a" * 5000], "invalid value for --executor-image: received "
     f"'gcr.io/x/{'a' * 51}…' (5,009 characters); expected {IMAGE_REF}: its name is 5,009 characters; registries "
     f"take at most 255; {IMAGE_FIX}"),
    ("config --executor-image gcr.io/x/\u00ff:1", "invalid value for --executor-image: received 'gcr.io/x/\u00ff:1'; "
     f"expected {IMAGE_REF}: image references are ASCII; '\u00ff' is not; {IMAGE_FIX}"),
    (["config", "--executor-image", "gcr.io/x/y:" + "t" * 129], "invalid value for --executor-image: received "
     f"'gcr.io/x/y:{'t' * 129}'; expected {IMAGE_REF}: its tag is 129 characters; registries take at most 128; "
     f"{IMAGE_FIX}"),
    ("config --config upper_image.yaml", "invalid value for workerPoolSpecs[0].containerSpec.imageUri: received "
     f"'gcr.io/x/Y:1'; expected {IMAGE_REF}: the repository path must be lowercase; {IMAGE_FIX}"),
    ("config --config legacy_image.yaml", "invalid value for trainingInput.masterConfig.imageUri: received "
     f"'gcr.io/x/y:1 && rm -rf ~'; expected {IMAGE_REF}: ' ' is not a character of image references; {IMAGE_FIX}"),
    ("train --dry-run --project p --region us-central1 --staging-bucket gs://bucket --executor-image 'a b'",
     f"invalid value for --executor-image: received 'a b'; expected {IMAGE_REF}: ' ' is not a character of image "
     f"references; {IMAGE_FIX}"),
    ("package --dry-run --executor-image 'gcr.io/x/y:1;touch /tmp/INJECTED'", "invalid value for --executor-image: "
     f"received 'gcr.io/x/y:1;touch /tmp/INJECTED'; expected {IMAGE_REF}: ';' is not a character of image "
     f"references; {IMAGE_FIX}"),
    ("package --dry-run --api bogus --runtime-version 9.99", "invalid value for --api: received 'bogus'; expected "
     "vertex or legacy"),
    ("package --dry-run --runtime-version 9.99", "invalid value for --runtime-version: received '9.99'; Vertex AI "
     "has no prebuilt TensorFlow 9.99 CPU training image; nearest that Vertex AI still runs: --runtime-version 2.21"),
    # an emulator capacity rule that could never apply (a typo would make a failover test pass without failing over)
    ("emulator --no-quota mars-1/NVIDIA_TESLA_T4", "invalid value for --no-quota: received 'mars-1/NVIDIA_TESLA_T4'; "
     f"expected a region of mlsubmit's table ({REGIONS}): mlsubmit sends no job to mars-1, so the rule would never "
     "apply"),
    ("emulator --stockout us-centrall1", "invalid value for --stockout: received 'us-centrall1'; expected a region of "
     f"mlsubmit's table ({REGIONS}): mlsubmit sends no job to us-centrall1, so the rule would never apply; did you "
     "mean 'us-central1'?"),
    ("emulator --no-quota europe-west1/NVIDIA_H200_141GB", "invalid value for --no-quota: received "
     "'europe-west1/NVIDIA_H200_141GB'; NVIDIA_H200_141GB is not offered in europe-west1, so the rule would never "
     "apply; regions that offer it: us-central1"),
    # click's usage errors: one line, with a did-you-mean
    ("config --wokers 2", "unknown option --wokers for `mlsubmit config`; did you mean '--workers'?"),
    ("predict m.keras -i x.npz --wieghts equal", "unknown option --wieghts for `mlsubmit predict`; did you mean "
     "'--weights'?"),
    ("config --zzz", "unknown option --zzz for `mlsubmit config`; see `mlsubmit config --help`"),
    ("config --tier", "option '--tier' requires an argument; see `mlsubmit config --help`"),
    ("predict -i x.npz", "missing argument 'MODEL'; see `mlsubmit predict --help`"),
    ("predict m.keras", "missing option '--input' / '-i'; see `mlsubmit predict --help`"),
    ("trian", "unknown command 'trian' for `mlsubmit`; did you mean 'train'?"),
    ("jobs lst", "unknown command 'lst' for `mlsubmit jobs`; did you mean 'list'?"),
    ("emulator --port \u0663", "invalid value for '--port': Input should be a valid integer, unable to parse string "
     "as an integer; see `mlsubmit emulator --help`"),
    ("--verison", "unknown option --verison for `mlsubmit`; did you mean '--version'?"),
]


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("hostile")
    for name, data in FILES.items():
        (folder / name).write_bytes(data)
    with open(folder / "big.yaml", "wb") as handle:
        handle.truncate(BIG)
    (folder / "m.keras").write_bytes(b"PK")  # only its name is looked at before these errors
    return folder


@pytest.mark.parametrize("args, message", CASES, ids=[(c[0] if isinstance(c[0], str) else " ".join(c[0]))[:50]
                                                     for c in CASES])
def test_hostile_input_is_one_line_exit_2(args, message, hostile_dir, monkeypatch):
    monkeypatch.chdir(hostile_dir)
    argv = shlex.split(args) if isinstance(args, str) else args  # a list: 1.7 MB that shlex would take 5 s over
    started = time.process_time()  # CPU time: the work done, whatever else loads the machine
    result = CliRunner().invoke(app, argv)
    assert time.process_time() - started < 2  # refused fast, alias bombs and 10 MB files included
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [f"error: {message}"]
    assert result.stdout == ""
    assert not list(hostile_dir.glob(".*.tmp"))


# The process itself, bounded: address space capped (a runaway dies instead of swapping the machine), CPU time
# capped, and its peak RSS and CPU time reported by a parent of its own (this test process has other children).
# CPU time, not wall time: the machine may be shared.
BOUNDED = """
import json, resource, subprocess, sys
limit = int(sys.argv[1]) << 20
def cap():
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CPU, (30, 30))
done = subprocess.run(sys.argv[2:], capture_output=True, text=True, preexec_fn=cap, timeout=60)
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps([done.returncode, done.stdout[-2000:], done.stderr[-20000:], usage.ru_utime + usage.ru_stime,
                  usage.ru_maxrss >> 10]))
"""
ADDRESS_SPACE_MIB = 1024  # far above what refusing needs; a 200 MB document does not fit once walked and dumped


def run_bounded(command: list[str], cwd: Path) -> tuple[int, str, list[str], float, int]:
    """(exit code, stdout, stderr lines, CPU seconds, peak RSS in MiB) of `command` under the caps above."""
    import json
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    done = subprocess.run([sys.executable, "-c", BOUNDED, str(ADDRESS_SPACE_MIB), *command], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=90)
    code, out, err, seconds, peak = json.loads(done.stdout)
    return code, out, err.splitlines(), seconds, peak


GRID = """
from mlsubmit.tuning.search import Search
from mlsubmit.tuning.spec import Parameter, TuningSpec
params = [Parameter(f"p{i}", "INTEGER", 1, 1000) for i in range(10)] + [Parameter("n", "INTEGER", 0, 10**18)]
search = Search(TuningSpec(goal="MAXIMIZE", metric="m", params=params, max_trials=10**9, algorithm="GRID_SEARCH"))
points = [search.ask()[1] for _ in range(1000)]
assert search.total == 10**9 and len({tuple(p.values()) for p in points}) == 1000
assert all(1 <= p["p3"] <= 1000 and 0 <= p["n"] <= 10**18 for p in points)
print("asked", len(points), "of a grid of", 1000**10 * (10**18 + 1))
"""


EXPANDING = [case for case in CASES if any(f"{name}.yaml" in case[0] for name in (
    "strings", "amplified", "base60", "bomb", "chain"))] + [
    # too slow for the in-process table on a loaded machine (~1 s of CPU): PyYAML parses ~10,000 values a second
    ("config --config flat.yaml", "invalid YAML in --config flat.yaml at line 2, column 20000: more than 10000 values "
     "(keys, items and scalars); a job config holds hundreds: check the file"),
]


@pytest.mark.parametrize("args, message", EXPANDING, ids=[case[0] for case in EXPANDING])
def test_expanding_inputs_are_refused_within_bounded_time_and_memory(args, message, hostile_dir):
    """The issue's 108 KB file ran 94 s of CPU and peaked at 413 MB (here: 157 s and 412 MB); a 1.5 MiB flat list
    took 150-220 s and 650 MB; refused, each costs what a plain run costs."""
    import sys

    code, out, err, seconds, peak = run_bounded([sys.executable, "-m", "mlsubmit", *shlex.split(args)], hostile_dir)
    assert (code, out, err) == (2, "", [f"error: {message}"])
    assert seconds < 5 and peak < 150, f"{seconds:.1f} s of CPU, {peak} MiB"


def test_a_grid_of_10_to_the_48_points_is_never_listed(tmp_path):
    """GRID_SEARCH asks for the points it needs: 1,000 distinct ones of 10**48, in bounded time and memory."""
    import sys

    code, out, err, seconds, peak = run_bounded([sys.executable, "-c", GRID], tmp_path)
    assert code == 0 and out.startswith("asked 1000 of a grid of 1"), err
    assert seconds < 5 and peak < 200, f"{seconds:.1f} s of CPU, {peak} MiB"


def test_yaml_anchors_and_merge_keys_still_work(hostile_dir, monkeypatch):
    """Bounded YAML is still YAML: a merge key's value may be overridden, small anchors are fine."""
    monkeypatch.chdir(hostile_dir)
    result = CliRunner().invoke(app, ["config", "--config", "anchors_ok.yaml"])
    assert result.exit_code == 0, result.output
    assert "machineType: n1-standard-8" in result.stdout


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_config_output_mode_follows_the_umask(umask, mode, tmp_path):
    previous = os.umask(umask)
    try:
        result = CliRunner().invoke(app, ["config", "-o", str(tmp_path / "job.yaml")])
    finally:
        os.umask(previous)
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE((tmp_path / "job.yaml").stat().st_mode) == mode
    assert [p.name for p in tmp_path.iterdir()] == ["job.yaml"]  # written atomically: no temporary file left


# Credentials: what google-auth cannot load or refresh is one line naming the file and the fix.
LOGIN = "run `gcloud auth application-default login`"
JOBS_LIST = ["jobs", "list", "--project", "p", "--region", "us-central1"]


@pytest.fixture
def no_adc(tmp_path, monkeypatch):
    """No gcloud configuration, no emulator endpoint: a cloud command must find credentials itself."""
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    for name in ("MLSUBMIT_API_ENDPOINT", "GOOGLE_APPLICATION_CREDENTIALS"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def _service_account(token_uri: str) -> dict:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    return {"type": "service_account", "project_id": "p", "private_key_id": "1", "private_key": pem,
            "client_email": "sa@p.iam.gserviceaccount.com", "client_id": "1", "token_uri": token_uri}


def test_credentials_that_cannot_refresh_offline_are_one_line(no_adc, monkeypatch):
    """An authorized_user ADC file whose token server is out of reach (here: a proxy that refuses)."""
    import json

    key = no_adc / "adc.json"
    key.write_text(json.dumps({"type": "authorized_user", "client_id": "c.apps.googleusercontent.com",
                               "client_secret": "s", "refresh_token": "1//r"}))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # offline, whatever the machine's network
    result = CliRunner().invoke(app, JOBS_LIST)
    assert result.stderr.splitlines() == [
        f"error: Google Cloud credentials ({key}) could not be refreshed: the token server oauth2.googleapis.com "
        f"could not be reached (ProxyError); check the network; if the login has expired, {LOGIN}"]
    assert result.exit_code == 1


def test_refused_refresh_is_one_line(no_adc, monkeypatch):
    """A token server that answers invalid_grant (a revoked key): RefreshError, one line, exit 2."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class TokenServer(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            body = json.dumps({"error": "invalid_grant", "error_description": "Invalid JWT Signature."}).encode()
            self.send_response(400)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), TokenServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        key = no_adc / "sa.json"
        key.write_text(json.dumps(_service_account(f"http://127.0.0.1:{server.server_port}/token")))
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
        result = CliRunner().invoke(app, JOBS_LIST)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert result.stderr.splitlines() == [
        f"error: Google Cloud credentials ({key}) could not be refreshed: invalid_grant: Invalid JWT Signature.; "
        f"{LOGIN}, or point GOOGLE_APPLICATION_CREDENTIALS at a valid key file"]
    assert result.exit_code == 2


@pytest.mark.parametrize("content, detail", [
    ('{"type": "service_account", "project_id": "p", "private_key": "garbage"',
     "JSONDecodeError: Expecting ',' delimiter: line 1 column 72 (char 71)"),
    ('{"type": "service_account", "private_key": "garbage", "client_email": "a@p.iam.gserviceaccount.com", '
     '"token_uri": "https://oauth2.googleapis.com/token"}',
     "ValueError: Unable to load PEM file. See https://cryptography.io/en/latest/faq/"
     "#why-can-t-i-import-my-pem-file for more details. MalformedFraming"),
    ('{"type": "service_account", "token_uri": "https://oauth2.googleapis.com/token"}', "MalformedError: Service "
     "account info was not in the expected format, missing fields client_email."),
])
def test_malformed_key_file_is_named_not_missing(content, detail, no_adc, monkeypatch):
    key = no_adc / "key.json"
    key.write_text(content)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(key))
    result = CliRunner().invoke(app, JOBS_LIST)
    assert result.stderr.splitlines() == [
        f"error: invalid Application Default Credentials file {key}: malformed ({detail}); download the key again "
        f"or {LOGIN}; GOOGLE_APPLICATION_CREDENTIALS names the file"]
    assert result.exit_code == 2


# predict: messages that name the real problem, and nothing in front of them
@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """A tiny softmax model, a truncated copy, and inputs: one with a NaN, labels stored as Python objects."""
    import keras
    import numpy as np

    folder = tmp_path_factory.mktemp("predict")
    inputs = keras.Input((4,))
    # named: Keras numbers unnamed layers per process (dense_3 after other tests' models), the cases below name it
    keras.Model(inputs, keras.layers.Dense(3, activation="softmax", name="dense")(inputs)).save(folder / "m.keras")
    whole = (folder / "m.keras").read_bytes()
    (folder / "cut.keras").write_bytes(whole[:len(whole) // 2])
    x = np.random.default_rng(0).random((6, 4), dtype=np.float32)
    np.savez(folder / "ok.npz", x_test=x, y_objects=np.array([1, "a", None, 2, 0, 1], dtype=object))
    x[4, 2] = np.nan
    np.savez(folder / "nan.npz", x_test=x)
    np.save(folder / "objects.npy", np.array([1, 2, None, 0, 1, 2], dtype=object))
    return folder


PREDICT_CASES = [
    ("predict m.keras -i nan.npz", "invalid input nan.npz[x_test]: row 4 holds nan; expected finite numbers; drop "
     "or fill in the rows with NaN or inf before predicting"),
    ("predict cut.keras -i ok.npz", "invalid value for MODEL: cut.keras is damaged or truncated (not a complete "
     "{size} bytes: File is not a zip file); copy or download the model again"),
    ("predict m.keras -i ok.npz --labels y_objects", "invalid value for --labels: received 'y_objects'; expected "
     "integer class labels; ok.npz[y_objects] holds Python objects (dtype object), which only unpickling could "
     "read; save the labels as integers, e.g. np.savez(FILE, y_test=y.astype('int64'))"),
    ("predict m.keras -i ok.npz --labels objects.npy", "invalid value for --labels: received 'objects.npy'; "
     "expected integer class labels; objects.npy holds Python objects (dtype object), which only unpickling could "
     "read; save the labels as integers, e.g. np.savez(FILE, y_test=y.astype('int64'))"),
]


@pytest.mark.parametrize("args, message", PREDICT_CASES, ids=[c[0] for c in PREDICT_CASES])
def test_predict_names_the_real_problem(args, message, model_dir, monkeypatch):
    monkeypatch.chdir(model_dir)
    message = message.replace("{size}", f".keras zip archive of {(model_dir / 'cut.keras').stat().st_size}")
    result = CliRunner().invoke(app, shlex.split(args))
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [f"error: {message}"]
    assert result.stdout == ""


def test_predict_error_is_the_only_line_on_stderr(model_dir):
    """A fresh process imports TensorFlow, whose C++ start-up lines would come first: stderr is one line."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    done = subprocess.run([sys.executable, "-m", "mlsubmit", "predict", "m.keras", "-i", "nan.npz"],
                          cwd=model_dir, env={**env, "PYTHONPATH": str(Path(__file__).parent.parent)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.splitlines() == [f"error: {PREDICT_CASES[0][1]}"]
    assert done.stdout == ""


# Request bodies: what mlsubmit would send is checked against the limit before anything is staged or submitted.
SUBMIT = ["train", "--dry-run", "--project", "p", "--region", "us-central1", "--staging-bucket", "gs://my-bucket",
          "--python-module", "tinypkg.task"]


def _tuning_values(count: int) -> str:
    values = ", ".join(f"v{i:06d}{'x' * 100}" for i in range(count))
    return f"studySpec:\n  metrics: [{{metricId: m, goal: MAXIMIZE}}]\n  parameters:\n  - parameterId: p\n" \
           f"    categoricalValueSpec: {{values: [{values}]}}\nmaxTrialCount: 1\n"


@pytest.mark.parametrize("files, flags, what, size", [
    ({"job.yaml": _amplified().replace("trainer.task", "tinypkg.task")}, ["--config", "job.yaml"],
     "the CustomJob request body", 2_008_179),
    ({"job.yaml": f"workerPoolSpecs:\n- machineSpec: {{machineType: n1-standard-4}}\n  replicaCount: 1\n"
                  f"  pythonPackageSpec:\n    args: [{', '.join(['a' * 1000] * 900)}]\n",
      "tune.yaml": _tuning_values(7000)}, ["--config", "job.yaml", "--hptune-config", "tune.yaml"],
     "the tuning job's request body", 1_673_605),
], ids=["args in four pools", "a big job and a big study"])
def test_request_bodies_over_the_limit_are_refused_before_staging(files, flags, what, size, tmp_path, monkeypatch):
    from support.tiny_package import make_project

    monkeypatch.chdir(tmp_path)
    package = make_project(tmp_path / "proj")
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    result = CliRunner().invoke(app, [*SUBMIT, "--package-path", str(package), *flags])
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [
        f"error: invalid job: {what} would be {size} bytes; expected at most 1572864 (1.5 MiB, the API's request "
        f"size limit); {SHORTEN}"]
    assert not (tmp_path / "dist").exists() and result.stdout == ""


# .keras archives that declare more than they store: refused from the zip's directory, before Keras reads a byte
def _deflated_spaces(mib: int) -> tuple[bytes, int]:
    """(raw deflate stream, crc32) of `mib` MiB of spaces, built from one compressed MiB: ~1 KB per MiB."""
    import zlib

    block, packer = b" " * (1 << 20), zlib.compressobj(9, zlib.DEFLATED, -15)
    first = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)
    again = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)  # the dictionary reset: the same bytes each MiB
    crc, chunk = 0, block * 64
    for _ in range(mib // 64):
        crc = zlib.crc32(chunk, crc)
    return first + again * (mib - 1) + packer.flush(), crc


def _zip(members: list[tuple[str, bytes, int, int, int]]) -> bytes:
    """A zip archive of (name, data as stored, crc32, declared size, method: 0 stored or 8 deflated) members."""
    import struct

    out, central = bytearray(), bytearray()
    for name, data, crc, size, method in members:
        raw, offset = name.encode(), len(out)
        out += struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0, method, 0, 0, crc, len(data), size, len(raw), 0)
        out += raw + data
        central += struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0, method, 0, 0, crc, len(data), size,
                               len(raw), 0, 0, 0, 0, 0, offset) + raw
    count = len(members)
    return bytes(out + central + struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, count, count, len(central), len(out),
                                             0))


def _stored(name: str, data: bytes) -> tuple[str, bytes, int, int, int]:
    import zlib

    return name, data, zlib.crc32(data), len(data), 0


@pytest.fixture(scope="module")
def hostile_models(model_dir) -> Path:
    import zipfile

    import keras

    with zipfile.ZipFile(model_dir / "m.keras") as real:
        parts = {info.filename: real.read(info) for info in real.infolist()}
    config, crc = _deflated_spaces(1024)
    weights, weights_crc = _deflated_spaces(2048)
    models = {
        "config_bomb.keras": [("config.json", config, crc, 1 << 30, 8)] + [
            _stored(n, d) for n, d in parts.items() if n != "config.json"],
        "weights_bomb.keras": [_stored(n, d) for n, d in parts.items() if n != "model.weights.h5"] + [
            ("model.weights.h5", weights, weights_crc, 2 << 30, 8)],
        "many.keras": [_stored(n, d) for n, d in parts.items()] + [_stored(f"assets/{i}", b"") for i in range(20_000)],
        "escape.keras": [_stored(n, d) for n, d in parts.items()] + [_stored("assets/../../evil.txt", b"x")],
    }
    (model_dir / "inner.h5").write_bytes(parts["model.weights.h5"])
    _fill_value_bomb(model_dir / "inner.h5", "layers/dense/vars/0")
    models["weights_fill.keras"] = [_stored(n, d) for n, d in parts.items() if n != "model.weights.h5"] + [
        _stored("model.weights.h5", (model_dir / "inner.h5").read_bytes())]
    for name, members in models.items():
        (model_dir / name).write_bytes(_zip(members))
    keras.models.load_model(model_dir / "m.keras").save(model_dir / "fill.h5")  # the legacy HDF5 format
    _fill_value_bomb(model_dir / "fill.h5", "model_weights/dense/dense/kernel")
    return model_dir


def _fill_value_bomb(path: Path, dataset: str) -> None:
    """Replace `dataset` by a chunked 30,000 x 30,000 float32 one (3.6 GB, under Keras's 4 GiB guard) never written:
    nothing stored, read as its fill value."""
    import h5py

    with h5py.File(path, "r+") as weights:
        del weights[dataset]
        weights.create_dataset(dataset, shape=(30_000, 30_000), dtype="float32", chunks=(1000, 1000),
                               compression="gzip")


FILL = ("3,600,000,000 bytes (30000, 30000) stored in 0; expected at most 100× what it stores (weights Keras saved "
        "are stored whole)")
NOT_KERAS = "this is not a model file Keras wrote; save the model again with model.save()"
ARCHIVE_CASES = [
    ("config_bomb.keras", "member config.json declares 1,073,741,824 bytes; expected at most 67,108,864 (64 MiB) "
     "for a file Keras reads whole into memory"),
    ("weights_bomb.keras", "member model.weights.h5 declares 2,147,483,648 bytes stored in {stored}; expected at "
     "most 100× (Keras stores members uncompressed)"),  # about 2 MB: how well zlib packs depends on its version
    ("many.keras", "it declares 20,003 members; expected at most 1,000 (Keras writes three, plus assets)"),
    ("escape.keras", "member 'assets/../../evil.txt' has a path outside the archive; expected paths inside it"),
    ("weights_fill.keras", f"member model.weights.h5: dataset layers/dense/vars/0 declares {FILL}"),
    ("fill.h5", f"dataset model_weights/dense/dense/kernel declares {FILL}"),
]


@pytest.mark.parametrize("model, says", ARCHIVE_CASES, ids=[case[0] for case in ARCHIVE_CASES])
def test_a_keras_archive_is_bounded_by_what_it_declares(model, says, hostile_models):
    """Keras 3 reads config.json whole and the weights into memory, refusing only members over 4 GiB: a 1 MB file
    declaring 1 GiB of config or 2 GiB of weights is refused from the zip directory, in bounded time and memory."""
    import sys
    import zipfile

    if "{stored}" in says:
        with zipfile.ZipFile(hostile_models / model) as archive:
            stored = archive.getinfo("model.weights.h5").compress_size
        says = says.replace("{stored}", f"{stored:,} ({(2 << 30) // stored:,}× compressed)")
    code, out, err, seconds, peak = run_bounded([sys.executable, "-m", "mlsubmit", "predict", model, "-i", "ok.npz"],
                                                hostile_models)
    assert (code, out, err) == (2, "", [f"error: invalid value for MODEL: {model} is not loaded: {says}; {NOT_KERAS}"])
    assert seconds < 5 and peak < 200, f"{seconds:.1f} s of CPU, {peak} MiB"



LONG_LINE = """
import resource, sys
from mlsubmit.local.runner import Replica, Runner
chatty = "import sys; sys.stdout.write('x' * 50_000_000); sys.stdout.flush()"  # 50 MB, never a newline
seen = []
outcome = Runner([Replica("chief-0", "chief", (sys.executable, "-c", chatty), {}, ".")],
                 sink=lambda line: seen.append(len(line)), on_line=lambda name, line: None).run()
print(outcome.state, len(seen), max(seen), sum(seen), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10)
"""


def test_a_replica_line_without_end_is_passed_on_in_bounded_pieces(tmp_path):
    """A replica printing 50 MB without a newline (train --local, the emulator's log store) is read 64 Ki characters
    at a time, each piece a line of its own: nothing holds the whole line."""
    import sys

    code, out, err, seconds, peak = run_bounded([sys.executable, "-c", LONG_LINE], tmp_path)
    state, pieces, longest, total, runner_peak = out.split()  # peak: of the replica, which holds its 50 MB
    assert (code, state, int(longest)) == (0, "SUCCEEDED", 65_536 + len("[chief-0] ")), err
    assert int(total) == 50_000_000 + int(pieces) * len("[chief-0] ")  # every character passed on
    assert seconds < 10 and int(runner_peak) < 60, f"{seconds:.1f} s of CPU, the runner's peak {runner_peak} MiB"
