"""`mlsubmit predict`: class probabilities and accuracy-weighted ensembles from trained models.

Parses and renders only; the work is `mlsubmit.predict.run.predict`. Nothing heavy is imported at module level.
"""

from __future__ import annotations

from typing import List, Optional

import typer
from typer.core import TyperCommand

from mlsubmit._typer_fast import PlainCoercion
from mlsubmit.jobspec.keras_backends import BACKENDS, DEFAULT as DEFAULT_BACKEND
from mlsubmit.predict.request import AUTO_BATCH_BYTES, MAX_AUTO_BATCH


class _PredictCommand(PlainCoercion, TyperCommand):
    """Plain coercion of every option (all are str, bool or list[str]): no pydantic import per run."""


def predict(
    models: List[str] = typer.Argument(..., metavar="MODEL", show_default=False,
                                       help="Job dirs written by the trainer (local or gs://…) or .keras/.h5 files; "
                                       "a job dir is used only if its MANIFEST.json vouches for every file."),
    inputs: List[str] = typer.Option(..., "--input", "-i", metavar="FILE", show_default=False,
                                     help="An .npz (x_test, or --input-key), a .npy, or image files/globs "
                                     "(repeatable; images are resized to the models' input shape)."),
    input_key: Optional[str] = typer.Option(None, "--input-key", help="The array of the .npz to predict on "
                                            "[default: x_test]."),
    weights: str = typer.Option("accuracy", "--weights", "-w",
                                help="accuracy (each job dir's recorded validation accuracy, else test accuracy), "
                                "equal, or one weight per model: w1,w2,…"),
    output: Optional[str] = typer.Option(None, "--output", "-o",
                                         help="Write every row here: .csv, .npz or .json (by extension); with "
                                         "--labels, a confusion matrix PNG goes next to it."),
    labels: Optional[str] = typer.Option(None, "--labels", help="True labels: an .npz/.npy file, or a key of the "
                                         "input .npz such as y_test; adds accuracy for every member and the ensemble."),
    batch_size: str = typer.Option("auto", "--batch-size", metavar="N",
                                   help=f"Rows per batch; memory is bounded by the batch, not the input. auto: up "
                                   f"to {MAX_AUTO_BATCH} rows and {AUTO_BATCH_BYTES >> 20} MB of input."),
    unsafe: bool = typer.Option(False, "--unsafe", help="Load models outside Keras safe mode. Needed for Lambda "
                                "layers, whose stored Python code runs on load: only for models you trust."),
    backend: Optional[str] = typer.Option(None, "--backend", metavar="NAME",
                                          help=f"Keras backend to predict under: {', '.join(BACKENDS)} "
                                          f"[default: $KERAS_BACKEND, else {DEFAULT_BACKEND}]; a model trained "
                                          "under any of them loads from its model.keras."),
) -> None:
    """Predict class probabilities with one model or an ensemble: Σ wᵢ·pᵢ / Σ wᵢ."""
    from rich.console import Console

    from mlsubmit.predict.request import make_request

    request = make_request(models, inputs, input_key=input_key, weights=weights, output=output, labels=labels,
                           batch_size=batch_size, unsafe=unsafe, backend=backend)

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from mlsubmit.predict import report
    from mlsubmit.predict.run import predict as run_predict

    err = Console(stderr=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=err, transient=True, disable=not err.is_terminal) as progress:
        task = progress.add_task("fetching and loading models", total=None)

        def on_progress(done: int, total: int) -> None:
            progress.update(task, description="predicting", completed=done, total=total)

        result = run_predict(request, on_progress)
    out = Console()
    out.print(report.head_table(result))
    out.print(report.members_table(result))
    for line in report.summary_lines(result):
        out.print(line, highlight=False)


def register(app: typer.Typer) -> None:
    app.command("predict", cls=_PredictCommand)(predict)
