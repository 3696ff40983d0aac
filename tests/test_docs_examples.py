"""Every example in the docs runs: each shell block of README.md and docs/ is run here (the cheap ones: config,
package --dry-run, train --dry-run, cache list, --help), or names the test that runs the same job, or says why it is
not run. A block whose output changed, a marker naming a test that does not exist, or a block with no marker fails,
naming the page and line."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.doc_blocks import (ROOT, SHELL, TEST_REF, all_blocks, console_commands, defined_test,
                                      missing_lines)

BLOCKS = all_blocks()
# the console script users run (its program name is in the usage errors the pages show)
SCRIPT = Path(sys.executable).with_name("mlsubmit")
MLSUBMIT = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "mlsubmit"]
RUN = [block for block in BLOCKS if block.marker == "run"]


def test_every_block_names_its_language_and_every_shell_block_how_it_is_tested():
    problems = []
    for block in BLOCKS:
        if not block.language:
            problems.append(f"{block.where}: a fenced block without a language (text for output, console or bash "
                            f"for commands, yaml, python…)")
        elif block.language in SHELL and block.marker is None:
            problems.append(f"{block.where}: a {block.language} block without a `<!-- doc-test: run | same as "
                            f"tests/…::test_… | not run: why -->` comment on the line before it")
        elif block.language not in SHELL and any(line.startswith("$ ") for line in block.body.splitlines()):
            problems.append(f"{block.where}: commands (`$ …`) in a {block.language} block: make it console")
        elif block.marker == "not run:" and len(block.marker_text) < 10:
            problems.append(f"{block.where}: `not run:` must say why")
        elif block.marker == "run" and (block.language != "console" or not console_commands(block.body)):
            problems.append(f"{block.where}: a `run` block is a console block of `$ mlsubmit …` commands")
    assert not problems, "\n".join(problems)


def test_every_test_a_page_names_exists():
    problems = []
    for block in BLOCKS:
        if block.marker != "same as":
            continue
        refs = TEST_REF.findall(block.marker_text)
        if not refs:
            problems.append(f"{block.where}: `same as` names no test (tests/test_x.py::test_y)")
        problems += [f"{block.where}: {path}::{name} does not exist" for path, name in refs
                     if not defined_test(path, name)]
    assert not problems, "\n".join(problems)


@pytest.fixture
def workdir(tmp_path):
    """A user's directory: the bundled trainer (its setup.py beside it) and the example configs."""
    shutil.copytree(ROOT / "trainer", tmp_path / "trainer", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "setup.py", tmp_path / "setup.py")
    shutil.copytree(ROOT / "configs", tmp_path / "configs")
    return tmp_path


@pytest.mark.parametrize("block", RUN, ids=[block.where for block in RUN])
def test_the_example_prints_what_the_page_shows(block, workdir):
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("MLSUBMIT_PROJECT", "MLSUBMIT_REGION", "MLSUBMIT_STAGING", "MLSUBMIT_API",
                                  "CLOUDSDK_CORE", "CLOUDSDK_COMPUTE", "STORAGE_EMULATOR"))}
    # what mlsubmit keeps starts empty, as on a new machine (the examples build no environment)
    env.update(MLSUBMIT_HOME=str(workdir / ".home"), MLSUBMIT_IMAGES=str(workdir / ".images"))
    env.update(NO_COLOR="1", COLUMNS="100", PYTHONUNBUFFERED="1")  # both streams in the order a terminal shows
    for command in console_commands(block.body):
        argv = shlex.split(command.argv_text)
        assert argv[0] == "mlsubmit", f"{block.where}: a run block holds only mlsubmit commands: {command.argv_text}"
        run = subprocess.run([*MLSUBMIT, *argv[1:]], cwd=workdir, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        output = run.stdout
        assert run.returncode == command.exit_code, (
            f"{block.where}: `{command.argv_text}` exited {run.returncode}, the page implies "
            f"{command.exit_code}:\n{output[-3000:]}")
        missing = missing_lines(command.expected, output)
        assert not missing, (f"{block.where}: `{command.argv_text}` no longer prints these lines the page shows:\n"
                             + "\n".join(missing) + f"\n--- it printed:\n{output[-4000:]}")
