"""Skip typer's pydantic coercion for plain options, to keep command start-up fast.

typer 0.29 coerces every option value (even an absent `--help`) through a pydantic TypeAdapter built on first
use; importing pydantic and building the adapters costs ~80-150 ms per run. Options typed bool, str, int, Path or
list[str] need no such machinery: `plain_coercion(params)` presets typer's lazily built `_runtime_param` of
those options with `_Plain`, which returns the value as the command line gave it. On a typer without
`_runtime_param` the preset attribute is simply unused and typer coerces as usual.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, get_args, get_origin


class _Plain:
    def __init__(self, kind: type) -> None:
        self.kind = kind

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        if value is None:
            return () if param.multiple or param.nargs == -1 else None
        if isinstance(value, (list, tuple)):
            return [str(item) for item in value]
        if isinstance(value, self.kind):
            return value
        try:
            return self.kind(value)
        except ValueError:  # an int option given a word: click's own one-line usage error
            from typer._click.exceptions import BadParameter

            raise BadParameter(f"{value!r} is not a valid integer.", ctx=ctx, param=param) from None


_PATH_DEFAULTS = {"exists": False, "file_okay": True, "dir_okay": True, "writable": False, "readable": True,
                  "resolve_path": False, "allow_dash": False}


def _constrained(info: Any) -> bool:
    """Whether typer would check more than the type: a custom parser, or Path checks such as exists=True."""
    return getattr(info, "parser", None) is not None or \
        any(getattr(info, name, default) != default for name, default in _PATH_DEFAULTS.items())


def plain_coercion(params: Iterable[Any]) -> None:
    """Give every unconstrained bool / str / int / Path / list[str] typer parameter in `params` the plain coercion."""
    for param in params:
        descriptor = getattr(param, "type_descriptor", None)
        if descriptor is None or _constrained(getattr(descriptor, "parameter_info", None)):
            continue
        annotation = descriptor.annotation
        if annotation in (bool, str, Path, int):
            param._runtime_param = _Plain(annotation)
        elif get_origin(annotation) is list and get_args(annotation) == (str,):
            param._runtime_param = _Plain(str)


class PlainCoercion:
    """Mixin for typer command and group classes: plain coercion for their own options and `--help`.

    Also names the command in its parser's usage errors (click raises "Option '--tier' requires an argument"
    without a context), so `mlsubmit.usage` can point at the command's own --help.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        plain_coercion(self.params)

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if option is not None:
            plain_coercion([option])
        return option

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        from typer._click.exceptions import UsageError

        try:
            return super().parse_args(ctx, args)  # type: ignore[misc]
        except UsageError as err:
            if err.ctx is None:
                err.ctx = ctx
            raise


def plain_classes() -> tuple[type, type]:
    """(group class, command class) for a command group of its own (`mlsubmit jobs`, `mlsubmit cache`): typer's,
    without pydantic per option."""
    from typer.core import TyperCommand, TyperGroup

    class PlainGroup(PlainCoercion, TyperGroup):
        pass

    class PlainCommand(PlainCoercion, TyperCommand):
        pass

    return PlainGroup, PlainCommand
