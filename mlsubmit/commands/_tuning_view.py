"""How the trials of a tuning job look on the terminal: one row per trial (state, parameters, final metric), the
best marked with `*`; and the PNG of the metric per trial against each parameter. Rendering only: the trials
come from mlsubmit.tuning.results."""

from __future__ import annotations

from typing import Any

import typer

from mlsubmit.tuning.search import flag_value


def _cell(value: Any) -> str:
    return f"{value:.6g}" if isinstance(value, float) else flag_value(value)


def trial_table(results: Any) -> None:
    """The trials as a table on stdout, the best marked, and a summary line."""
    from rich.table import Table

    from mlsubmit.commands._jobs_view import _STATE_COLOURS, _print

    names = list(dict.fromkeys(name for t in results.trials for name in t.parameters))
    table = Table(box=None, header_style="bold", pad_edge=False)
    for column in ("", "TRIAL", "STATE", *names, results.metric.upper() or "METRIC", "STEP"):
        table.add_column(column, no_wrap=True)
    for trial in results.trials:
        colour = _STATE_COLOURS.get(trial.state, "white")
        table.add_row("*" if trial.best else "", trial.id, f"[{colour}]{trial.state}[/]",
                      *[_cell(trial.parameters.get(n, "")) for n in names],
                      "" if trial.value is None else _cell(trial.value), "" if trial.step is None else str(trial.step))
    best = results.best
    said = (f"best: trial {best.id} ({results.metric} {_cell(best.value)}, {results.goal.lower()})" if best
            else f"no trial reported {results.metric!r} yet")
    summary = f"{len(results.trials)} of {results.max_trials} trials, at most {results.parallel_trials} at once; {said}"
    _print(table if results.trials else "no trials yet")
    typer.echo(summary)


def write_plot(results: Any, path: str, *, title: str = "") -> None:
    from mlsubmit.errors import OperationFailed
    from mlsubmit.tuning.results import plot

    try:
        written = plot(results, path, title=title)
    except OSError as err:
        raise OperationFailed(f"cannot write the plot {path}: {err.strerror or err}",
                              hint="choose a writable --plot path") from None
    typer.echo(f"plot: {written} (the metric of each trial against each parameter)", err=True)
