"""`--output table|json`, the option of the commands that list things (`jobs …`, `cache …`), and its check."""

from __future__ import annotations

from typing import Annotated

import typer

from mlsubmit.errors import did_you_mean, invalid_value

OUTPUTS = ("table", "json")
OUTPUT = Annotated[str, typer.Option("--output", "-o", metavar="table|json", help="table for people, json for "
                                     "scripts.")]


def checked_output(output: str) -> str:
    """`output` when it is one of OUTPUTS; otherwise the one-line error (with a did-you-mean)."""
    if output not in OUTPUTS:
        raise invalid_value("--output", output, "table or json", hint=did_you_mean(output, OUTPUTS))
    return output
