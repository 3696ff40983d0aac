"""Read a `requirements.txt` as install requirements (PEP 508 strings), and split `--requirements` lists.

A trainer without a setup.py often keeps its dependencies in `requirements.txt` beside the package (the Cloud
ML samples do). Blank lines and comments are skipped and `-r other.txt` is followed; pip's other options
(`-e`, `--index-url`, `-c`, …) have no place in a package's metadata and are refused with the line that has one.
"""

from __future__ import annotations

from pathlib import Path

from mlsubmit.errors import UsageError, invalid_value

REQUIREMENTS_TXT = "requirements.txt"


def find_requirements_txt(package_dir: Path) -> Path | None:
    """`requirements.txt` beside the package (the project root), else inside it; None without one."""
    for candidate in (package_dir.parent / REQUIREMENTS_TXT, package_dir / REQUIREMENTS_TXT):
        if candidate.is_file():
            return candidate
    return None


def read_requirements_txt(path: Path, _seen: frozenset[Path] = frozenset()) -> tuple[str, ...]:
    """The requirements `path` lists, in order, each checked as PEP 508.

    Raises:
        UsageError: unreadable file, a pip option other than `-r`, an invalid requirement, or an `-r` cycle.
    """
    from packaging.requirements import InvalidRequirement, Requirement

    path = path.resolve()
    if path in _seen:
        raise UsageError(f"{path} includes itself through -r", hint="remove the cycle")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise invalid_value("requirements file", str(path), "a readable UTF-8 file", hint=str(err)) from None
    found: list[str] = []
    for number, raw in enumerate(lines, 1):
        line = raw.split(" #", 1)[0].strip() if not raw.lstrip().startswith("#") else ""
        if not line:
            continue
        if line.startswith(("-r ", "--requirement ", "-r", "--requirement=")):
            included = line.split("=", 1)[1] if line.startswith("--requirement=") else \
                line.split(None, 1)[1] if " " in line else line[2:]
            found += read_requirements_txt(path.parent / included.strip(), _seen | {path})
            continue
        if line.startswith("-"):
            raise UsageError(f"{path} line {number}: {line!r} is a pip option, not a requirement a package can "
                             "declare", hint="keep index and editable options out of the trainer's requirements "
                                             "(pip's configuration or --requirements can carry them)")
        try:
            Requirement(line)
        except InvalidRequirement:
            raise invalid_value(f"requirement in {path} line {number}", line,
                                "a PEP 508 requirement such as 'pandas>=2'") from None
        found.append(line)
    return tuple(found)


def split_requirements(values: list[str] | tuple[str, ...] | None, flag: str = "--requirements") -> tuple[str, ...]:
    """`--requirements a,b>=1 --requirements c` → ('a', 'b>=1', 'c'), each checked as PEP 508.

    A comma inside brackets (`pkg[a,b]`) stays part of the requirement.
    """
    from packaging.requirements import InvalidRequirement, Requirement

    found: list[str] = []
    for value in values or ():
        depth, start = 0, 0
        pieces = []
        for index, char in enumerate(value):
            depth += char == "["
            depth -= char == "]"
            if char == "," and depth == 0:
                pieces.append(value[start:index])
                start = index + 1
        pieces.append(value[start:])
        for piece in (p.strip() for p in pieces):
            if not piece:
                continue
            try:
                Requirement(piece)
            except InvalidRequirement:
                raise invalid_value(flag, piece, "PEP 508 requirements separated by commas, e.g. "
                                    "'pandas,scipy>=1.3.0'") from None
            found.append(piece)
    return tuple(dict.fromkeys(found))
