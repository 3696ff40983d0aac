"""The house rule for bad input, as a test asserts it on a CliRunner result: exit 2, one line on stderr naming it."""

from __future__ import annotations


def refused(result, *needles: str) -> None:
    """`result` (typer's CliRunner) exited 2 with exactly one `error: …` line on stderr holding every needle."""
    assert result.exit_code == 2, result.output
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: "), result.stderr
    for needle in needles:
        assert needle in result.stderr, result.stderr
