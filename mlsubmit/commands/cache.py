"""`mlsubmit cache list|prune`: what mlsubmit keeps on this machine, and removing what is not used (parse and
render; the work is mlsubmit.cache.inventory). A table for people, `--output json` for scripts."""

from __future__ import annotations

import json
import time
from typing import Annotated, Optional

import typer

from mlsubmit._typer_fast import plain_classes
from mlsubmit.commands._output import OUTPUT, checked_output



_Group, _Command = plain_classes()
_OTHERS_SHOWN = 20  # lines of what is not mlsubmit's in the table


cache_app = typer.Typer(cls=_Group, name="cache", no_args_is_help=True, rich_markup_mode=None, add_completion=False,
                        help="What mlsubmit keeps on this machine (image, requirements and job environments, venvs, "
                             "built sdists, check results): list it with size and last use, prune what is not used. "
                             "After every build, what was not used for MLSUBMIT_CACHE_MAX_AGE (default 30d) is "
                             "removed, and the rest cut to MLSUBMIT_CACHE_MAX_SIZE when set (e.g. 20GB).")


def register(app: typer.Typer) -> None:
    app.add_typer(cache_app, name="cache")


def _when(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(seconds)) if seconds else "never"


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _entry_json(entry, in_use: bool, reason: str | None = None) -> dict:
    from mlsubmit.cache.inventory import KINDS

    found = {"kind": entry.kind, "what": KINDS[entry.kind].label, "path": str(entry.path), "size_bytes": entry.size,
             "last_use": _iso(entry.last_use), "in_use": in_use, "prunable": KINDS[entry.kind].prunable,
             "built_on": [str(path) for path in entry.parents], "image": entry.note or None,
             "mlsubmits": entry.kind != "other", "looks_like": entry.looks_like or None}
    return found if reason is None else {**found, "reason": reason}


def _rows(found, in_use) -> list[tuple[str, str, str, str, str]]:
    """(what, size, last use, state, where): environments one a line, the many small files one line a kind."""
    from mlsubmit.cache.inventory import KINDS
    from mlsubmit.cache.limits import show_size

    order = list(KINDS)
    rows, groups, others = [], {}, 0
    ordered = sorted(found, key=lambda e: (order.index(e.kind), -e.last_use))
    for entry in ordered:
        kind = KINDS[entry.kind]
        if kind.grouped:
            groups.setdefault(entry.kind, []).append(entry)
            continue
        others += entry.kind == "other"
        if others > _OTHERS_SHOWN:  # another program's cache may hold thousands of files: `-o json` lists them
            if others == _OTHERS_SHOWN + 1:
                rest = [e for e in ordered if e.kind == "other"][_OTHERS_SHOWN:]
                rows.append((f"{kind.label} ({len(rest)} more)", show_size(sum(e.size or 0 for e in rest)),
                             _when(max(e.last_use for e in rest)), "kept", "`mlsubmit cache list -o json` lists them"))
            continue
        state = "in use" if entry.path in in_use else ("" if kind.prunable else "kept")
        what = f"{kind.label} ({entry.note or f'unmarked {entry.looks_like}'})" \
            if entry.note or entry.looks_like else kind.label
        rows.append((what, show_size(entry.size or 0), _when(entry.last_use), state, str(entry.path)))
    for kind_name, items in sorted(groups.items(), key=lambda item: order.index(item[0])):
        kind = KINDS[kind_name]
        folders = sorted({str(item.path.parent) for item in items})
        rows.append((f"{kind.label} ({len(items)})", show_size(sum(item.size or 0 for item in items)),
                     _when(max(item.last_use for item in items)), "" if kind.prunable else "kept",
                     folders[0] if len(folders) == 1 else f"{len(folders)} folders, e.g. {folders[0]}"))
    return rows


def _table(rows) -> None:
    header = ("WHAT", "SIZE", "LAST USE", "STATE", "WHERE")
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(4)]
    for row in [header, *rows]:
        typer.echo("  ".join([*(cell.ljust(width) for cell, width in zip(row, widths)), row[4]]).rstrip())


@cache_app.command("list", cls=_Command)
def list_command(output: OUTPUT = "table") -> None:
    """List everything mlsubmit keeps under $MLSUBMIT_HOME and $MLSUBMIT_IMAGES: size, last use, whether in use."""
    from mlsubmit.cache import inventory, ownership
    from mlsubmit.cache.limits import from_environment, show_size

    checked_output(output)
    limits = from_environment()
    home, images = inventory.roots()
    found = inventory.scan()
    in_use = inventory.busy(found)
    total = sum(entry.size or 0 for entry in found)
    prunable = sum(entry.size or 0 for entry in found if inventory.KINDS[entry.kind].prunable)
    if output == "json":
        typer.echo(json.dumps({"home": str(home), "images": [str(path) for path in images], "total_bytes": total,
                               "prunable_bytes": prunable,
                               "limits": {"max_size_bytes": limits.max_size, "max_age_seconds": limits.max_age},
                               "entries": [_entry_json(entry, entry.path in in_use) for entry in found]}, indent=1))
        return
    if found:
        _table(_rows(found, in_use))
    size_limit = show_size(limits.max_size) if limits.max_size is not None else "none"
    age_limit = f"{limits.max_age / 86400:g} days" if limits.max_age is not None else "none"
    others = [entry for entry in found if entry.kind == "other"]
    total -= sum(entry.size or 0 for entry in others)
    typer.echo(f"mlsubmit keeps {show_size(total)} in {home}" + "".join(f" and {path}" for path in images
                                                                        if not path.is_relative_to(home))
               + f"; {show_size(prunable)} of it can be rebuilt and pruned (size limit {size_limit}, unused for "
                 f"more than {age_limit}: MLSUBMIT_CACHE_MAX_SIZE, MLSUBMIT_CACHE_MAX_AGE)")
    if others:
        typer.echo(f"{len(others)} item(s) ({show_size(sum(entry.size or 0 for entry in others))}) there are not "
                   f"mlsubmit's: they lack the {ownership.MARK} mark it writes in what it makes (another program's "
                   "files, or what an mlsubmit from before these marks built) and no prune removes them; remove one by hand "
                   "(rm -r PATH) if you know it is not needed — an environment is built again when a job needs it")


@cache_app.command("prune", cls=_Command)
def prune_command(
    older_than: Annotated[Optional[str], typer.Option(
        "--older-than", metavar="AGE", show_default=False,
        help="Remove what was not used for AGE (30d, 12h, 2w) [default: $MLSUBMIT_CACHE_MAX_AGE, else 30d].")] = None,
    max_size: Annotated[Optional[str], typer.Option(
        "--max-size", metavar="SIZE", show_default=False,
        help="Then cut what can be rebuilt to SIZE (20GB, 500MB, 1.5GiB), least recently used first "
             "[default: $MLSUBMIT_CACHE_MAX_SIZE, else no limit]. Either flag replaces both settings.")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be removed; remove nothing.")] = False,
    output: OUTPUT = "table",
) -> None:
    """Remove environments and caches that are not in use: unfinished builds, what was not used for --older-than,
    then the least recently used until --max-size holds. An environment a running job uses is never removed."""
    from mlsubmit.cache import inventory
    from mlsubmit.cache.limits import Limits, from_environment, parse_age, parse_size, show_size

    checked_output(output)
    if older_than is None and max_size is None:
        limits = from_environment()
    else:
        limits = Limits(parse_size(max_size, "--max-size") if max_size is not None else None,
                        parse_age(older_than, "--older-than") if older_than is not None else None)
    outcome = inventory.prune(limits, dry_run=dry_run)
    if output == "json":
        typer.echo(json.dumps({"dry_run": dry_run,
                               "removed": [_entry_json(r.entry, False, r.reason) for r in outcome.removed],
                               "kept_in_use": [_entry_json(entry, True) for entry in outcome.plan.in_use],
                               "size_before_bytes": outcome.plan.size_before,
                               "size_after_bytes": outcome.plan.size_after}, indent=1))
        return
    verb = "would remove" if dry_run else "removed"
    for removal in outcome.removed:
        entry = removal.entry
        typer.echo(f"{verb} {inventory.KINDS[entry.kind].label} {entry.path} ({show_size(entry.size or 0)}, last "
                   f"used {_when(entry.last_use)}): {removal.reason}")
    for entry in outcome.plan.in_use:
        typer.echo(f"kept {inventory.KINDS[entry.kind].label} {entry.path}: in use")
    freed = sum(r.entry.size or 0 for r in outcome.removed)
    typer.echo(f"{'would free' if dry_run else 'freed'} {show_size(freed)} in {len(outcome.removed)} item(s); what "
               f"can be rebuilt {'would take' if dry_run else 'takes'} "
               f"{show_size(outcome.plan.size_before - freed)} (was {show_size(outcome.plan.size_before)})")
