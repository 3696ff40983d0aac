"""Rich rendering of a prediction run: the first rows, and every member beside the ensemble.

The files themselves (predictions, confusion matrix) are written by `mlsubmit.predict.outputs`.
"""

from __future__ import annotations

from rich.table import Table

from mlsubmit.predict.run import ENSEMBLE, PredictResult

NOT_RECORDED = "—"  # a member whose metrics.json does not say which backend trained it (or a bare model file)


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.2%}"


def head_table(result: PredictResult) -> Table:
    """The first few predictions."""
    table = Table(title=f"first {len(result.head)} of {result.rows} predictions", title_justify="left")
    table.add_column(result.id_column)
    table.add_column("predicted", justify="right")
    table.add_column("probability", justify="right")
    with_labels = result.labels is not None
    if with_labels:
        table.add_column("label", justify="right")
        table.add_column("", justify="center")
    for row in result.head:
        cells = [row.id, str(row.predicted), f"{row.probability:.4f}"]
        if with_labels:
            cells += [str(row.label), "✓" if row.label == row.predicted else "✗"]
        table.add_row(*cells)
    return table


def members_table(result: PredictResult) -> Table:
    """Each member's weight (and what it is based on), the Keras backend it was trained under and, with labels, its
    accuracy beside the ensemble's (whose row names the backend that predicted)."""
    total = sum(m.weight.value for m in result.members)
    title = "members and ensemble" + (f" — accuracy on {result.labels}" if result.labels else "")
    table = Table(title=title, title_justify="left")
    table.add_column("model")
    table.add_column("weight", justify="right")
    table.add_column("share", justify="right")
    table.add_column("weight from")
    table.add_column("trained under")
    if result.labels:
        table.add_column("accuracy", justify="right")
    for member in result.members:
        cells = [member.name, f"{member.weight.value:.4g}", f"{member.weight.value / total:.1%}", member.weight.basis,
                 member.trained_under or NOT_RECORDED]
        if result.labels:
            cells.append(_percent(member.accuracy))
        table.add_row(*cells)
    if result.labels:
        table.add_section()
        table.add_row(f"[bold]{ENSEMBLE}[/bold]", "", "100%", "Σ wᵢ·pᵢ / Σ wᵢ", result.backend,
                      f"[bold]{_percent(result.ensemble_accuracy)}[/bold]")
    return table


def summary_lines(result: PredictResult) -> list[str]:
    lines = [f"predicted under {result.predicted_under}"]
    if result.ensemble_accuracy is not None and len(result.members) > 1:
        best = max(result.members, key=lambda m: m.accuracy or 0.0)
        gain = 100 * (result.ensemble_accuracy - (best.accuracy or 0.0))
        lines.append(f"ensemble accuracy {_percent(result.ensemble_accuracy)}: {gain:+.2f} points against the best "
                     f"member ({best.name}, {_percent(best.accuracy)})")
    if result.downloaded or result.reused:
        lines.append(f"models: {result.downloaded} file(s) downloaded, {result.reused} reused from the cache")
    for path in result.files:
        lines.append(f"wrote {path}")
    if not result.files:
        lines.append("no output file: pass --output FILE (.csv, .npz or .json) to save every row")
    return lines
