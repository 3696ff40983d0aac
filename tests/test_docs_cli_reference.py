"""docs/reference/cli.md is every command's `--help` as the code prints it today: a changed flag, default or help
text fails here until the page is regenerated (simonw/llm checks its cog-generated reference the same way)."""

from __future__ import annotations

import difflib

from tests.support.trainer_run import ROOT
from tools import gen_cli_reference


def test_the_cli_reference_page_matches_the_commands_help():
    page = ROOT / "docs" / "reference" / "cli.md"
    expected = gen_cli_reference.render()
    current = page.read_text() if page.exists() else ""
    if current != expected:
        diff = "".join(list(difflib.unified_diff(current.splitlines(True), expected.splitlines(True),
                                                 "docs/reference/cli.md (checked in)", "generated from the code"))[:60])
        raise AssertionError(f"docs/reference/cli.md is out of date with the CLI; regenerate it with "
                             f"`{gen_cli_reference.COMMAND}` and commit it.\n{diff}")


def test_every_command_has_its_own_reference_entry():
    """An added command (or subcommand) gets a heading and a `--help` block: nothing of the CLI is undocumented."""
    text = gen_cli_reference.render()
    paths = gen_cli_reference.commands()
    assert {"train", "config", "package", "emulator", "predict", "jobs", "cache"} <= {p[0] for p in paths if p}
    assert ["jobs", "list"] in paths and ["cache", "prune"] in paths
    for path in paths:
        title = " ".join(["mlsubmit", *path])
        assert f"`{title}` {{#{gen_cli_reference._anchor(path)}}}" in text
        assert f"Usage: {title} " in text
