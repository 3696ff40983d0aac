"""The mlsubmit command line: parses, calls, renders — no business logic here.

Each command lives in `mlsubmit/commands/<name>.py` and registers itself on `app`. Those modules import
only light things at module level, so `mlsubmit --help` never loads TensorFlow or the Google clients.
`MlsubmitError` is caught in exactly one place: `_Group.invoke`.
"""

from __future__ import annotations

import sys

import typer
from typer._click import exceptions as typer_errors
from typer.core import TyperGroup

from mlsubmit import __version__
from mlsubmit._typer_fast import PlainCoercion
from mlsubmit.errors import MlsubmitError, from_system, from_user_input
from mlsubmit.usage import one_line


class Terminated(KeyboardInterrupt):
    """SIGTERM to mlsubmit: unwinds like Ctrl-C (every `finally` and child-process group runs its cleanup), then one
    line and exit 143."""


def _on_sigterm(signum: int, frame: object) -> None:
    raise Terminated()


class _Group(PlainCoercion, TyperGroup):
    """Turns any MlsubmitError raised by a command (and the few OS errors only user input causes:
    errors.from_user_input) into one red line on stderr and its exit code, and click's
    three-line usage errors into one line (mlsubmit.usage): parsing the root's options happens in make_context,
    a subcommand's inside invoke.

    PlainCoercion: an absent --help would otherwise import pydantic on every command (~100 ms).
    """

    def make_context(self, *args, **kwargs):
        try:
            return super().make_context(*args, **kwargs)
        except typer_errors.UsageError as err:
            raise one_line(err) from None

    def invoke(self, ctx: typer.Context):
        try:
            return super().invoke(ctx)
        except Terminated:
            typer.secho("error: stopped by SIGTERM; nothing half-made was kept; run the command again to start over",
                        fg="red", err=True)
            raise typer.Exit(143) from None
        except (MlsubmitError, OSError, UnicodeEncodeError) as err:
            error = err if isinstance(err, MlsubmitError) else from_user_input(err) or from_system(err)
            if error is None:
                raise
            typer.secho(f"error: {error.one_line()}", fg="red", err=True)
            raise typer.Exit(error.exit_code) from None
        except typer_errors.UsageError as err:
            raise one_line(err) from None


app = typer.Typer(
    cls=_Group,
    name="mlsubmit",
    help="Train Keras models data-parallel on every GPU: validated job specs, packaging, submission and "
    "downstream prediction for Vertex AI, legacy AI Platform and this machine.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Plain click help: typer's rich help imports rich.markdown/markdown_it (~150 ms of a ~300 ms `--help`).
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"mlsubmit {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """mlsubmit."""


def _register_commands() -> None:
    # Importing a command module registers its commands on `app`; each keeps heavy imports inside functions.
    from mlsubmit import commands

    commands.register(app)


_register_commands()


def main() -> None:
    import signal

    signal.signal(signal.SIGTERM, _on_sigterm)  # the runners and the emulator put their own in place while they run
    sys.exit(app(standalone_mode=True))
