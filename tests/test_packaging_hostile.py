"""Hostile and careless package trees: secrets of every kind, links out of the package, loops, unreadable files,
a big file. Each row plants files into a real project, runs `mlsubmit package` as a user does and opens the
tar.gz it wrote: what must stay out is not among its members, and every exclusion is named in one warning line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from support.tiny_package import FAKE_SERVICE_ACCOUNT, make_project, write
from support.unprivileged import as_a_user
from typer.testing import CliRunner

from mlsubmit.cli import app
from mlsubmit.packaging.credentials import ContentScan
from mlsubmit.packaging.ignore import walk

ROOT = Path(__file__).resolve().parent.parent
KEPT = "(credentials never go into a package)"
OUT = "(nothing outside the package directory goes into a package)"
AWS_ID, AWS_SECRET = "AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
ADC = '{"type": "authorized_user", "client_id": "x.apps.googleusercontent.com", "refresh_token": "1//0abc"}'
GOOGLE_USER = 'Google user credentials (refresh token) (JSON "type": "authorized_user")'
GOOGLE_SA = 'Google service-account key (JSON "type": "service_account")'
GCLOUD_DIR = {"credentials.db": b"SQLite format 3\0", "access_tokens.db": b"SQLite format 3\0",
              ".boto": "[Credentials]\ngs_oauth2_refresh_token = 1//0abc\n", "active_config": "default\n"}


def big_service_account() -> str:  # a valid service-account JSON of more than 1 MiB
    document = json.loads(FAKE_SERVICE_ACCOUNT)
    return json.dumps({"comment": "x" * (1 << 20) + "y" * 100, **document})


# id: (files to plant under the package {path: content}, {link: target}, expected warnings {path: reason})
# A link target starting with "@" is made absolute under the test's temporary directory (outside the package).
HOSTILE = {
    "netrc": ({".netrc": "machine example.com login me password hunter2\n"}, {},
              {".netrc": "netrc passwords (.netrc)"}),
    "netrc by content": ({"hosts.cfg": "machine pypi.org\n  login me\n  password hunter2\n"}, {},
                         {"hosts.cfg": "netrc password entry (machine … login … password …)"}),
    "git credentials": ({".git-credentials": "https://me:tok@github.com\n"}, {},
                        {".git-credentials": "git credential store (.git-credentials)"}),
    "aws directory": ({".aws/credentials": "[default]\n", ".aws/config": "[default]\nregion = x\n"}, {},
                      {".aws/config": "inside AWS credentials directory (.aws/)",
                       ".aws/credentials": "inside AWS credentials directory (.aws/)"}),
    "aws credentials by content": (
        {"conf/credentials": f"[default]\naws_access_key_id = {AWS_ID}\naws_secret_access_key = {AWS_SECRET}\n"},
        {}, {"conf/credentials": "AWS secret access key (aws_secret_access_key)"}),
    "aws key pair in code": ({"settings.py": f'KEY = "{AWS_ID}"\nSECRET = "{AWS_SECRET}"\n'}, {},
                             {"settings.py": "AWS access key id (AKIA…) with a secret key"}),
    "oauth client secret by name": ({"client_secret_123.apps.googleusercontent.com.json": "{}"}, {},
                                    {"client_secret_123.apps.googleusercontent.com.json":
                                     "OAuth client secret (client_secret*.json)"}),
    "oauth client secret by content": ({"oauth.json": '{"installed": {"client_id": "a", "client_secret": "b"}}'},
                                       {}, {"oauth.json": 'OAuth client secret (JSON "client_secret")'}),
    "adc by name": ({"application_default_credentials.json": "{}"}, {},
                    {"application_default_credentials.json": "Google application-default credentials"}),
    "adc with a BOM": ({"adc.json": "\ufeff" + ADC}, {}, {"adc.json": GOOGLE_USER}),
    "adc in UTF-16": ({"adc16.json": ADC.encode("utf-16")}, {}, {"adc16.json": GOOGLE_USER}),
    "adc in UTF-16 without a BOM": ({"adc.txt": ADC.encode("utf-16-le")}, {}, {"adc.txt": GOOGLE_USER}),
    "service account over 1 MiB": ({"big.json": big_service_account()}, {}, {"big.json": GOOGLE_SA}),
    "keystores": ({"release.keystore": b"\xfe\xed\xfe\xed", "app.jks": b"\xfe\xed"}, {},
                  {"app.jks": "Java key store (*.jks)", "release.keystore": "Java key store (*.keystore)"}),
    "pypirc": ({".pypirc": "[pypi]\npassword = pypi-abc\n"}, {}, {".pypirc": "PyPI upload credentials (.pypirc)"}),
    "npmrc with a token": ({".npmrc": "//registry.npmjs.org/:_authToken=npm_abc123\n"}, {},
                           {".npmrc": "npm registry token (_authToken=)"}),
    "docker config with auths": ({".docker/config.json": '{"auths": {"r.io": {"auth": "dXNlcjpwYXNzd29yZA=="}}}'},
                                 {}, {".docker/config.json":
                                      'registry credentials (JSON "auths")'}),
    "PEM key in any file": ({"notes.md": "-----BEGIN EC PRIVATE KEY-----\nabc\n-----END EC PRIVATE KEY-----\n"},
                            {}, {"notes.md": "contains a PEM private-key block"}),
    "github token in code": ({"deploy.py": 'TOKEN = "ghp_' + "a1B2" * 9 + '"\n'}, {},
                             {"deploy.py": "GitHub token (ghp_… / github_pat_…)"}),
    "gcloud config copied in": ({f"gcloud/{k}": v for k, v in GCLOUD_DIR.items()}
                                | {"gcloud/legacy_credentials/me@x.com/adc.json": ADC}, {},
                                {"gcloud/.boto": "gcloud/boto credentials (.boto)",
                                 "gcloud/access_tokens.db": "gcloud access-token cache (access_tokens.db)",
                                 "gcloud/credentials.db": "gcloud credential store (credentials.db)",
                                 "gcloud/legacy_credentials/me@x.com/adc.json":
                                     "inside gcloud credentials directory (legacy_credentials/)"}),
    "link to /etc": ({}, {"etc_link": "/etc"}, {"etc_link": "symbolic link to /etc, outside the package"}),
    "link to the package's parent": ({}, {"up": ".."}, {"up": "symbolic link to @/proj, outside the package"}),
    "link to a file outside": ({}, {"peek.txt": "@/outside/secret.txt"},
                               {"peek.txt": "symbolic link to @/outside/secret.txt, outside the package"}),
    "link to a gcloud config dir": ({}, {"gc": "@/outside/gcloud"},
                                    {"gc": "symbolic link to @/outside/gcloud, outside the package"}),
    "link inside to a credential dir": ({".ssh/id_ed25519": "k", ".ssh/known_hosts": "h"}, {"keys": ".ssh"},
                                        {".ssh/id_ed25519": "inside SSH keys directory (.ssh/)",
                                         ".ssh/known_hosts": "inside SSH keys directory (.ssh/)",
                                         "keys/id_ed25519": "inside SSH keys directory (.ssh/)",
                                         "keys/known_hosts": "inside SSH keys directory (.ssh/)"}),
}
# Harmless look-alikes that must go in.
HARMLESS = {"web/.npmrc": "registry=https://npm.example.com/\n", "docker/config.json": '{"credsStore": "desktop"}',
            "labels.json": '{"type": "classification", "auth": "basic-authentication"}',
            "model.py": f'KEY_ID = "{AWS_ID}"\n',  # a key id alone is not a secret
            "notes.txt": "the default password of a machine learning password manager\n", "big.bin": b"\0\1" * 40000}


def members(path: Path) -> list[str]:
    with tarfile.open(path) as tar:
        return [name.split("/", 1)[1] for name in tar.getnames()]


def plant(package: Path, files: dict, links: dict, outside: Path) -> None:
    for rel, content in files.items():
        write(package / rel, content)
    for rel, target in links.items():
        (package / rel).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target.replace("@", str(outside.parent)), package / rel)


def package(package_dir: Path, dist: Path, *more: str):
    return CliRunner().invoke(app, ["package", "--package-path", str(package_dir), "--skip-preflight",
                                    "--dist-dir", str(dist), *more])


@pytest.mark.parametrize("files, links, expected", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_trees_leave_out_exactly_what_they_must_and_say_so(tmp_path, files, links, expected):
    tmp_path = tmp_path.resolve()
    package_dir = make_project(tmp_path / "proj")
    outside = tmp_path / "outside"
    write(outside / "secret.txt", "not yours\n")
    for name, content in GCLOUD_DIR.items():
        write(outside / "gcloud" / name, content)
    plant(package_dir, {**files, **HARMLESS}, links, outside)

    result = package(package_dir, tmp_path / "dist")
    assert result.exit_code == 0, result.output
    warned = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
    assert warned == [f"warning: left out tinypkg/{path}: {reason.replace('@', str(tmp_path))} "
                      f"{OUT if reason.startswith('symbolic link') else KEPT}" for path, reason in expected.items()]
    inside = members(tmp_path / "dist" / "tinypkg-1.2.0.tar.gz")
    left_out = [path for path in inside if any(path == f"tinypkg/{rel}" or path.startswith(f"tinypkg/{rel}/")
                                               for rel in [*expected, *links])]
    assert left_out == []
    assert {f"tinypkg/{rel}" for rel in HARMLESS} <= set(inside)
    # the plain file list other builds (pypa/build's copy of the project) start from is the same selection
    assert [path for path, _ in walk(package_dir)[0]] == [name for name in inside if name.startswith("tinypkg/")]
    assert not [name for name in inside if Path(name).name in (".boto", "credentials.db", "access_tokens.db")
                or "secret.txt" in name]


def test_links_inside_the_package_are_followed_unless_their_target_is_left_out(tmp_path):
    package_dir = make_project(tmp_path / "proj")
    write(package_dir / ".git" / "config", "[remote]\nurl = https://me:token@example.com/r.git\n")
    write(package_dir / "scratch" / "x.py", "")
    write(package_dir / ".mlsubmitignore", "scratch/\n")
    plant(package_dir, {}, {"data_alias": "data", "sub/task_copy.py": "../task.py", "gone": "missing",
                            "git_config": ".git/config", "scratch_x.py": "scratch/x.py"}, tmp_path)
    result = package(package_dir, tmp_path / "dist")
    assert result.exit_code == 0 and "warning" not in result.stderr, result.output
    inside = members(tmp_path / "dist" / "tinypkg-1.2.0.tar.gz")
    assert {"tinypkg/data_alias/config.json", "tinypkg/sub/task_copy.py", "tinypkg/data/config.json"} <= set(inside)
    assert not [name for name in inside if any(word in name for word in ("gone", "git", "scratch"))]
    listed = CliRunner().invoke(app, ["package", "--package-path", str(package_dir), "--dry-run"]).stdout
    assert "left out  tinypkg/gone  (broken symbolic link to missing)" in listed
    assert ("left out  tinypkg/git_config  (symbolic link to tinypkg/.git/config, which is left out (VCS metadata))"
            in listed)
    assert ("left out  tinypkg/scratch_x.py  (symbolic link to tinypkg/scratch/x.py, which is left out (ignored by "
            "tinypkg/.mlsubmitignore:1))") in listed


def test_train_names_what_it_leaves_out_of_the_package(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    package_dir = make_project(tmp_path / "proj")
    plant(package_dir, {".env": "TOKEN=1\n"}, {"etc_link": "/etc"}, tmp_path)
    result = CliRunner().invoke(app, ["train", "--package-path", str(package_dir), "--project", "p", "--region",
                                      "us-central1", "--staging-bucket", "gs://my-bucket", "--tier", "BASIC",
                                      "--dry-run"])
    assert result.exit_code == 0, result.output
    assert [line for line in result.stderr.splitlines() if "left out" in line] == [
        f"warning: left out tinypkg/.env: environment file (.env*) {KEPT}",
        f"warning: left out tinypkg/etc_link: symbolic link to /etc, outside the package {OUT}"]


@pytest.mark.parametrize("links, line", [
    ({"loop": "loop"}, "error: symbolic link tinypkg/loop -> loop loops: it never resolves to a file or directory; "
                       "fix or remove the link, or leave it out with a line in .mlsubmitignore"),
    ({"a": "b", "b": "a"}, "error: symbolic link tinypkg/a -> b loops: it never resolves to a file or directory; "
                           "fix or remove the link, or leave it out with a line in .mlsubmitignore"),
    ({"sub/again": ".."}, "error: symbolic link tinypkg/sub/again -> .. points back to tinypkg/, a directory that "
                          "contains it (a loop); fix or remove the link, or leave it out with a line in "
                          ".mlsubmitignore"),
], ids=["self", "pair", "to a parent"])
def test_a_link_loop_is_one_line_and_exit_2(tmp_path, links, line):
    package_dir = make_project(tmp_path / "proj")
    plant(package_dir, {}, links, tmp_path)
    result = package(package_dir, tmp_path / "dist")
    assert (result.exit_code, result.stderr.splitlines()) == (2, [line])
    assert not (tmp_path / "dist").exists()
    write(package_dir / ".mlsubmitignore", "\n".join(links) + "\n")  # what the hint says works
    assert package(package_dir, tmp_path / "dist").exit_code == 0


UNREADABLE = [  # (what is made unreadable, the one line)
    ("private/", "error: cannot read tinypkg/private/: permission denied; make it readable (chmod), or leave it out "
                 "with a line in .mlsubmitignore"),
    ("weights.bin", "error: cannot read tinypkg/weights.bin: permission denied; make it readable (chmod), or leave "
                    "it out with a line in .mlsubmitignore"),
    (".gitignore", "error: cannot read tinypkg/.gitignore: permission denied; make it readable (chmod) or remove it"),
    ("", "error: cannot read @: permission denied; make it readable (chmod) or pass another --package-path"),
]


def test_unreadable_file_or_directory_is_one_line_and_exit_2(tmp_path):
    # Root reads everything: run as root, the command drops the capabilities that let it (support.unprivileged),
    # and still reaches the interpreter and the checkout wherever they are (a 0700 home, `mktemp -d`).
    package_dir = make_project(tmp_path / "proj")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MLSUBMIT_HOME": str(tmp_path / "home")}
    for rel, line in UNREADABLE:
        path = package_dir / rel
        path.mkdir() if rel.endswith("/") else path.exists() or write(path, "x")
        os.chmod(path, 0)
        try:
            done = subprocess.run([sys.executable, "-m", "mlsubmit", "package", "--package-path", str(package_dir),
                                   "--skip-preflight", "--dist-dir", str(tmp_path / "dist")], env=env,
                                  capture_output=True, text=True, timeout=60, **as_a_user())
        finally:
            os.chmod(path, 0o755)  # pytest must be able to remove tmp_path, pass or fail
        assert (done.returncode, done.stderr.splitlines()) == (2, [line.replace("@", str(package_dir))])
        if rel:
            shutil.rmtree(path) if rel.endswith("/") else path.unlink()
    assert not (tmp_path / "dist").exists()


def test_a_file_that_becomes_a_credential_after_selection_is_refused(tmp_path):
    from mlsubmit.errors import UsageError
    from mlsubmit.packaging import plan_sdist, write_sdist

    package_dir = make_project(tmp_path / "proj")
    plan = plan_sdist(package_dir)
    write(package_dir / "sub" / "mod.py", "VALUE = 42\nKEY = '-----BEGIN RSA PRIVATE KEY-----'\n")
    with pytest.raises(UsageError, match="tinypkg/sub/mod.py changed while it was being packaged and now looks "
                                         "like a credential"):
        write_sdist(plan, tmp_path / "dist")
    assert not (tmp_path / "dist").exists()  # nothing left, not even the folder it made for the sdist


@pytest.mark.parametrize("data, found", [
    (b"-----BEGIN PRIVATE KEY-----", "PEM"),
    (b"x" * ((1 << 20) - 10) + b"-----BEGIN PRIVATE KEY-----", "PEM"),  # across two chunks
    ("\ufeff-----BEGIN OPENSSH PRIVATE KEY-----".encode("utf-16-be"), "PEM"),
    (b'{"private_key": "x"}', "private_key"),
    (b'x = {"private_key": "x"}', None),  # outside JSON, a key name alone is not a tell
    (b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 100, None),
    (f"id={AWS_ID}".encode(), None),  # a key id alone is not a secret
])
def test_content_scan(data, found):
    scan = ContentScan("x.txt")
    for start in range(0, len(data), 1 << 20):
        scan.feed(data[start:start + (1 << 20)])
    assert (scan.reason is None) if found is None else (found in scan.reason)


def test_a_big_file_is_streamed_with_flat_memory(tmp_path):
    size = 200 << 20
    package_dir = make_project(tmp_path / "proj")
    with open(package_dir / "weights.bin", "wb") as handle:  # sparse: costs no disk
        handle.truncate(size)
    # The peak RSS of the packaging process alone: measured by a parent of its own (the children of this test
    # process include whatever earlier tests started).
    measure = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:], timeout=100); "
               "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    command = [sys.executable, "-m", "mlsubmit", "package", "--package-path", str(package_dir), "--skip-preflight",
               "--dist-dir", str(tmp_path / "dist")]
    done = subprocess.run([sys.executable, "-c", measure, *command], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    code, peak_kib = map(int, done.stdout.split()[-2:])
    assert code == 0, done.stderr
    assert peak_kib < 100 * 1024, f"peak RSS {peak_kib >> 10} MiB while packaging a {size >> 20} MiB file"
    with tarfile.open(tmp_path / "dist" / "tinypkg-1.2.0.tar.gz") as tar:
        assert tar.getmember("tinypkg-1.2.0/tinypkg/weights.bin").size == size
