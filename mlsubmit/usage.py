"""Click's usage errors (unknown option, missing argument, no such command) as one `error:` line, exit code 2.

Click prints three lines for these (`Usage: …`, `Try '… -h' for help.`, `Error: …`); every other mistake in
mlsubmit is one line. `one_line(err)` returns an equivalent UsageError whose `show()` prints

    error: unknown option --wieghts for `mlsubmit predict`; did you mean '--weights'?

with a did-you-mean from difflib over the command's own options (or subcommands), else a pointer to --help.
"""

from __future__ import annotations

from typing import IO, Any

import typer
from typer._click import exceptions as click_errors  # typer 0.29 vendors click; its own core imports it so

from mlsubmit.errors import MAX_SHOWN, SHOWN_START, bounded, did_you_mean, printable, shown


class OneLineUsageError(click_errors.UsageError):
    """A usage error already phrased as mlsubmit's one line (message; hint)."""

    def show(self, file: IO[Any] | None = None) -> None:
        typer.secho(f"error: {bounded(printable(self.message))}", fg="red", err=True)


def _options(command: Any) -> list[str]:
    names: list[str] = []
    for param in getattr(command, "params", ()):
        if param.param_type_name == "option":
            names.extend(param.opts + param.secondary_opts)
    return names + ["--help"]


def _sentence(text: str) -> str:
    text = text.strip().rstrip(".")
    return text[:1].lower() + text[1:]


def one_line(err: click_errors.UsageError) -> click_errors.UsageError:
    """The one-line form of a click UsageError (returned unchanged if it is already one, or is a help request)."""
    if isinstance(err, (OneLineUsageError, click_errors.NoArgsIsHelpError)):
        return err
    ctx = err.ctx
    where = f" for `{ctx.command_path}`" if ctx is not None else ""
    help_hint = f"see `{ctx.command_path} --help`" if ctx is not None else "see --help"
    hint = None
    if isinstance(err, click_errors.NoSuchOption):
        name = err.option_name  # as typed: a long one by its start and length
        name = name if len(name) <= MAX_SHOWN else f"{name[:SHOWN_START]}… ({len(name):,} characters)"
        message = f"unknown option {name}{where}"
        hint = did_you_mean(err.option_name, _options(ctx.command)) if ctx is not None else None
    elif err.message.startswith("No such command") and ctx is not None:
        typed = err.message.split("'")[1] if err.message.count("'") >= 2 else ""
        message = f"unknown command {shown(typed)}{where}"
        commands = getattr(ctx.command, "list_commands", lambda _ctx: [])(ctx)
        hint = did_you_mean(typed, commands)
        if not hint:
            message += f"; expected one of {', '.join(commands)}"
    else:  # the --help hint names the command
        message = _sentence(err.format_message())
    result = OneLineUsageError(f"{message}; {hint or help_hint}", ctx)
    result.exit_code = err.exit_code
    return result
