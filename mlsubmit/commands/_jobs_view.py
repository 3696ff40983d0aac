"""How cloud jobs look on the terminal: tables, a description, streamed log lines with a live status line, and
the end of following a job (its outcome, why it failed, how to reattach after Ctrl-C). Rendering only: the
work is mlsubmit.targets.
"""

from __future__ import annotations

import json
import os
import sys
import time
from datetime import datetime, timezone
from typing import Any

import typer

from mlsubmit.errors import OperationFailed

_STATE_COLOURS = {"SUCCEEDED": "green", "FAILED": "red", "CANCELLED": "yellow", "CANCELLING": "yellow",
                  "EXPIRED": "red", "RUNNING": "cyan"}
_TASK_COLOURS = ("cyan", "magenta", "blue", "green", "yellow", "bright_cyan", "bright_magenta", "bright_blue")
INTERRUPTED = 130  # exit code after Ctrl-C: the job was not seen to succeed


def parse_time(text: str | None) -> datetime | None:
    """RFC 3339 as the APIs write it (Z, up to nanoseconds) → an aware datetime."""
    if not text:
        return None
    head, _, rest = text.rstrip("Z").partition(".")
    fraction = "".join(c for c in rest if c.isdigit())[:6]
    try:
        moment = datetime.fromisoformat(head + (f".{fraction}" if fraction else ""))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def duration(start: str | None, end: str | None = None) -> str:
    begun, ended = parse_time(start), parse_time(end) or datetime.now(timezone.utc)
    if begun is None:
        return ""
    seconds = max(0, int((ended - begun).total_seconds()))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m{rest % 60:02d}s" if hours else f"{rest // 60}m{rest % 60:02d}s" \
        if rest >= 60 else f"{rest}s"


def ran_seconds(status: Any) -> int | None:
    """Wall time of a job so far: start to end, or to now; None if it has not started. A tuning job's is the sum of
    its trials' (each trial runs the trial job's pools)."""
    def seconds(start: str | None, end: str | None) -> int | None:
        begun = parse_time(start)
        if begun is None:
            return None
        return max(0, int(((parse_time(end) or datetime.now(timezone.utc)) - begun).total_seconds()))

    trials = status.resource.get("trials")
    if trials:
        return sum(seconds(t.get("startTime"), t.get("endTime")) or 0 for t in trials)
    return seconds(status.start_time, status.end_time)


def cost_so_far(status: Any) -> dict[str, Any]:
    from mlsubmit.jobspec.cost import spent

    return spent(status, ran_seconds(status))


def short_time(text: str | None) -> str:
    moment = parse_time(text)
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment else ""


def _console(stderr: bool = False):
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    return Console(file=stream, width=None if stream.isatty() else 200, highlight=False,
                   no_color=bool(os.environ.get("NO_COLOR")))


def _print(renderable: Any) -> None:
    """Print a rich renderable on stdout without the padding rich adds to the end of every line."""
    console = _console()
    with console.capture() as captured:
        console.print(renderable)
    sys.stdout.write("\n".join(line.rstrip() for line in captured.get().splitlines()) + "\n")
    sys.stdout.flush()


def print_json(value: Any) -> None:
    typer.echo(json.dumps(value, indent=2, sort_keys=False))


def job_table(statuses: list[Any]) -> None:
    from rich.table import Table

    table = Table(box=None, header_style="bold", pad_edge=False)
    legacy = bool(statuses) and statuses[0].api == "legacy"
    from mlsubmit.jobspec.cost import money

    for column in (("JOB ID",) if legacy else ("JOB ID", "NAME")) + ("STATE", "CREATED (UTC)", "RAN", "COST", "JOB DIR"):
        table.add_column(column, no_wrap=column != "JOB DIR")
    for status in statuses:
        state = f"[{_STATE_COLOURS.get(status.state, 'white')}]{status.state}[/]"
        ran = duration(status.start_time, status.end_time) if status.start_time else ""
        cells = [status.job_id] + ([] if legacy else [status.display_name])
        usd = cost_so_far(status)["usd"] if status.start_time else None
        table.add_row(*cells, state, short_time(status.create_time), ran, "" if not status.start_time else
                      money(usd) if usd is not None else "unknown", status.artifacts or "(none)")
    _print(table if statuses else "no jobs")


def _pool(pool: Any) -> str:
    accelerator = f" + {pool.accelerator_count} {pool.accelerator}" if pool.accelerator else ""
    return f"{pool.role} {pool.replicas} × {pool.machine}{accelerator}"


def _capacity(status: Any) -> dict[str, Any] | None:
    from mlsubmit.jobspec.scheduling import of_resource

    return of_resource(status.resource or {}, status.state, bool(status.start_time))


def describe(status: Any, console_url: str | None) -> None:
    from rich.table import Table

    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column(overflow="fold")
    noun = {"vertex": "Vertex AI custom job", "cluster": "job on your own cluster",
            "kubernetes": "Kubernetes job"}.get(status.api, "legacy AI Platform job")
    noun = "Vertex AI hyperparameter tuning job" if "studySpec" in status.resource else noun
    rows = [("job", f"{status.job_id} ({noun})"), ("name", status.name)]
    if status.display_name and status.display_name != status.job_id:
        rows.append(("display name", status.display_name))
    colour = _STATE_COLOURS.get(status.state, "white")
    rows.append(("state", f"[{colour}]{status.state}[/]" + (f" ({status.api_state})" if status.api_state !=
                                                             status.state else "")))
    rows += [("created", short_time(status.create_time)), ("started", short_time(status.start_time)),
             ("ended", short_time(status.end_time))]
    if status.start_time:
        rows.append(("ran", duration(status.start_time, status.end_time)))
    if status.region:
        rows.append(("target" if status.api == "cluster" else "region", status.region))
    if status.tier and status.tier != "CUSTOM":
        rows.append(("scale tier", status.tier))
    if status.pools:
        rows.append(("cluster", "; ".join(_pool(p) for p in status.pools)))
    program = status.program
    if program.get("module"):
        rows.append(("program", " ".join(["python -m", program["module"], *program.get("args", ())])))
    for key, label in (("packages", "packages"), ("image", "executor image"), ("runtime", "runtime version"),
                       ("container", "container")):
        value = program.get(key)
        if value:
            rows.append((label, ", ".join(value) if isinstance(value, list) else str(value)))
    rows.append(("artifacts", status.artifacts or "(no job dir)"))
    found = _capacity(status)
    if found:
        from mlsubmit.jobspec.scheduling import capacity_text

        waiting = found["waiting"]
        rows.append(("capacity", f"[yellow]{capacity_text(found)}[/]" if waiting else capacity_text(found)))
    for key, value in status.consumed.items():
        rows.append((key, str(value)))
    from mlsubmit.jobspec.cost import spent_text

    rows.append(("cost", spent_text(cost_so_far(status))))
    if status.labels:
        rows.append(("labels", ", ".join(f"{k}={v}" for k, v in sorted(status.labels.items()))))
    if status.error:
        rows.append(("error", f"[red]{status.error.strip()}[/]"))
    if console_url:
        rows.append(("console", console_url))
    for key, value in rows:
        if value:
            grid.add_row(key, value)
    _print(grid)


def status_json(status: Any, **extra: Any) -> dict[str, Any]:
    document = status.to_dict()
    document["cost"] = cost_so_far(status)  # estimated: wall time x the price table's rate of its pools
    document["capacity"] = _capacity(status)
    document.update(extra)
    return document


class LogPrinter:
    """Log entries as `task | text` lines (a colour per task on a terminal), or JSON lines, handed to `write`."""

    def __init__(self, output: str = "table", write: Any = None):
        self.output = output
        self.write = write or _write_stdout
        self.colour = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        self.colours: dict[str, str] = {}
        self.width = 0

    def __call__(self, entries: list[Any]) -> None:
        lines = []
        for entry in entries:
            if self.output == "json":
                lines.append(json.dumps({"insertId": entry.insert_id, "timestamp": entry.timestamp,
                                         "task": entry.task, **({"trial": entry.trial} if entry.trial else {}),
                                         "severity": entry.severity, "text": entry.text}))
                continue
            self.width = max(self.width, len(entry.source))
            prefix = f"{entry.source:<{self.width}} |"
            if self.colour:
                colour = self.colours.setdefault(entry.source, _TASK_COLOURS[len(self.colours) % len(_TASK_COLOURS)])
                prefix = typer.style(prefix, fg=colour)
            lines.extend(f"{prefix} {text}" for text in entry.text.splitlines() or [""])
        if lines:
            self.write(lines)


def _write_stdout(lines: list[str]) -> None:
    sys.stdout.write("\n".join(lines) + "\n")
    sys.stdout.flush()


class _StatusText:
    """The live status line's text, rendered afresh (elapsed time) every time the spinner redraws."""

    def __init__(self, status: Any) -> None:
        self.status = status
        self.lines = 0
        self.started = time.monotonic()

    def __rich__(self) -> Any:
        from rich.text import Text

        status = self.status
        since = duration(status.start_time) if status.start_time else f"{int(time.monotonic() - self.started)}s"
        waiting = "waiting for logs" if not self.lines else "no new logs"
        return Text.assemble(f"job {status.job_id} ", (status.state, "bold"),
                             f" · {since} · {waiting} · Ctrl-C detaches")


class StatusLine:
    """A live status line at the bottom of the terminal while following (stderr is a terminal), else one stderr
    line per state change. Log lines bound for the same terminal are printed above the live line; stdout that
    goes elsewhere (a pipe, a file) gets them untouched."""

    def __init__(self, status: Any) -> None:
        self.live = sys.stderr.isatty()
        self.text = _StatusText(status)
        self.last_state: str | None = None
        self._live: Any = None

    def __enter__(self) -> "StatusLine":
        if self.live:
            from rich.live import Live
            from rich.spinner import Spinner

            # No redirection: rich would send whatever reaches sys.stdout to the terminal, even when stdout is piped.
            self._live = Live(Spinner("dots", self.text, style="green"), console=_console(stderr=True),
                              refresh_per_second=8, transient=True, redirect_stdout=False, redirect_stderr=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)

    def write(self, lines: list[str]) -> None:
        """Log lines: above the live line when stdout is that terminal, else straight to stdout."""
        if self._live is not None and sys.stdout.isatty():
            from rich.text import Text

            self._live.console.print(Text.from_ansi("\n".join(lines)), soft_wrap=True, highlight=False,
                                     markup=False)
        else:
            _write_stdout(lines)

    def update(self, status: Any) -> None:
        self.text.status = status
        if self._live is None and status.state != self.last_state:
            typer.echo(f"job {status.job_id}: {status.state}", err=True)
        self.last_state = status.state

    def saw_lines(self, count: int) -> None:
        self.text.lines += count

    def warn(self, text: str) -> None:
        if self._live is not None:
            self._live.console.print(f"warning: {text}", style="yellow", soft_wrap=True, highlight=False,
                                     markup=False)
        else:
            typer.secho(f"warning: {text}", fg="yellow", err=True)


def reattach(status: Any, settings: Any) -> str:
    """The flags that reach this job again from another shell: --api, and --project/--region/--endpoint when
    they came from flags (the environment and gcloud's configuration are still there)."""
    flags = [f"--api {status.api}"] if status.api != "vertex" else []
    if settings is not None:
        for name in ("project", "region", "endpoint"):
            if settings.from_flag(name) and (name != "region" or status.api == "vertex"):
                flags.append(f"--{name} {getattr(settings, name)}")
    return " ".join([status.job_id, *flags])


def detached(status: Any, settings: Any) -> None:
    """After Ctrl-C: the job keeps running; how to reattach and how to cancel."""
    where = reattach(status, settings)
    typer.echo("", err=True)
    typer.secho(f"detached from job {status.job_id}; it keeps running.", fg="yellow", err=True)
    typer.echo(f"  follow it again:  mlsubmit jobs logs {where} --follow", err=True)
    typer.echo(f"  cancel it:        mlsubmit jobs cancel {where}", err=True)


def follow(service: Any, status: Any, *, settings: Any, logs: bool, task: str | None = None,
           timeout: float | None = None, output: str = "table", announced: bool = False) -> Any:
    """Follow the job (logs and a status line, or the status only) to its end; Ctrl-C detaches (exit 130)."""
    from mlsubmit.targets import follow as following

    policy = following.PollPolicy.from_env(timeout)
    finder = following.TracebackFinder()
    try:
        with StatusLine(status) as line:
            printer = LogPrinter(output, write=line.write)
            if announced:
                line.last_state = status.state  # the state was said already (e.g. when the job was accepted)
            if not logs:
                return following.wait(service, status, policy=policy, on_status=line.update), finder

            def show(entries: list[Any]) -> None:
                finder.feed(entries)
                line.saw_lines(len(entries))
                printer(entries)

            final = following.stream(service, status, policy=policy, task=task, on_entries=show,
                                      on_status=line.update, on_warning=line.warn)
            return final, finder
    except KeyboardInterrupt:
        detached(status, settings)
        raise typer.Exit(INTERRUPTED) from None


def finish(service: Any, final: Any, finder: Any = None, *, settings: Any, check_manifest: bool = True) -> None:
    """Say how the job ended. Returns when it SUCCEEDED; otherwise raises OperationFailed (exit 1) after showing
    the last traceback of its logs ONCE: streamed logs showed it already (then only its exception line is named);
    otherwise it is read from the logs and shown here. The error names the command that shows the whole log."""
    colour = _STATE_COLOURS.get(final.state, "white")
    ran = f" in {duration(final.start_time, final.end_time)}" if final.start_time else ""
    typer.secho(f"job {final.job_id} {final.state}{ran}", fg=colour, bold=True, err=True)
    if final.succeeded:
        if final.artifacts:  # only what is there: a trainer that wrote elsewhere left nothing in the job's dir
            note = _manifest_note(final.artifacts) if check_manifest else ""
            typer.echo(f"artifacts: none in {final.artifacts}/ (the trainer wrote nothing there)" if note == _NOTHING
                       else f"artifacts: {final.artifacts}/{note}", err=True)
        return
    streamed = finder is not None and finder.fed
    found = finder if streamed else _last_traceback(service, final)
    if found is not None and found.text and not streamed:
        typer.secho(f"── last traceback in the job's logs ({found.task}) " + "─" * 30, fg="red", err=True)
        typer.echo(found.text, err=True)
    error = (final.error or "").strip().splitlines()
    raised = f"; {found.task} raised {found.exception}" if found is not None and found.exception and \
        found.exception not in error[:1] else ""
    where = "its traceback is above; " if found is not None and found.text else ""
    raise OperationFailed(f"job {final.job_id} {final.state}" + (f": {error[0]}" if error else "") + raised,
                          hint=f"{where}the whole log: mlsubmit jobs logs {reattach(final, settings)}")


def _last_traceback(service: Any, final: Any) -> Any:
    from mlsubmit.targets.follow import TracebackFinder
    from mlsubmit.errors import MlsubmitError

    finder = TracebackFinder()
    try:
        finder.feed(service.logs(final))
    except MlsubmitError:
        return None  # the logs cannot be read: the job's error says enough
    return finder


_NOTHING = " (nothing there)"


def _manifest_note(job_dir: str) -> str:
    """Whether the trainer's MANIFEST.json (written last) is there: best effort, never an error."""
    from mlsubmit.cloud import storage
    from mlsubmit.errors import MlsubmitError

    if not storage.is_gcs(job_dir):
        return ""
    try:
        found = storage.stat(storage.join(job_dir, "MANIFEST.json"),
                             retry=storage.RetryPolicy(initial=0.2, deadline=5, probe_deadline=5))
    except MlsubmitError:
        return ""
    if found:
        return " (MANIFEST.json written last: complete)"
    from mlsubmit.local.job_dir_report import holds_objects

    return _NOTHING if holds_objects(job_dir) is False else " (no MANIFEST.json)"
