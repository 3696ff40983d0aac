"""Read a trainer's distribution metadata (name, version, install requirements) from its `setup.py` without
executing it.

The file is parsed with `ast`: the keywords of its `setup(...)` call are taken when they are literals or
names of module-level literal assignments (`NAME = "trainer"` … `setup(name=NAME)`); without a `setup(...)`
call the conventional constants `NAME`, `VERSION` and `REQUIRED_PACKAGES` are used. Anything computed at run
time (reading a file, string formatting, `setup(**config)`) cannot be read statically: `ComputedMetadata` says
so, and the package is then built by a real build frontend instead (`frontend.py`).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from mlsubmit.errors import UsageError, invalid_value

_NAME = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", re.IGNORECASE)
_CONSTANTS = {"name": "NAME", "version": "VERSION", "install_requires": "REQUIRED_PACKAGES"}
_OPTIONAL = ("install_requires", "python_requires", "description")
_UNREADABLE = (ValueError, TypeError, SyntaxError, RecursionError)  # what literal_eval raises for non-literals


@dataclass(frozen=True)
class ProjectMetadata:
    """What the sdist's PKG-INFO and generated setup.py say; validated when built."""

    name: str
    version: str
    requires: tuple[str, ...] = ()
    python_requires: str | None = None
    summary: str | None = None
    source: str = "setup.py"  # where it was read from, for messages

    def __post_init__(self) -> None:
        from packaging.requirements import InvalidRequirement, Requirement
        from packaging.specifiers import InvalidSpecifier, SpecifierSet
        from packaging.version import InvalidVersion, Version

        if not _NAME.match(self.name):
            raise invalid_value(f"name in {self.source}", self.name, "a distribution name of letters, digits, "
                                "'.', '-' and '_' starting and ending with a letter or digit")
        try:
            Version(self.version)
        except InvalidVersion:
            raise invalid_value(f"version in {self.source}", self.version, "a PEP 440 version such as '0.1.0'")
        for requirement in self.requires:
            try:
                Requirement(requirement)
            except InvalidRequirement:
                raise invalid_value(f"install requirement in {self.source}", requirement,
                                    "a PEP 508 requirement such as 'h5py>=3.10'") from None
        if self.python_requires is not None:
            try:
                SpecifierSet(self.python_requires)
            except InvalidSpecifier:
                raise invalid_value(f"python_requires in {self.source}", self.python_requires,
                                    "a version specifier such as '>=3.10'") from None

    @property
    def filename_stem(self) -> str:
        """`name-version` as sdist file names spell it (PEP 625: name normalised with underscores)."""
        from packaging.version import Version

        return f"{re.sub(r'[-_.]+', '_', self.name).lower()}-{Version(self.version)}"


class ComputedMetadata(UsageError):
    """The setup.py computes its metadata (reads a file, formats a string): only running it can tell."""


def default_metadata(package: str) -> ProjectMetadata:
    """Metadata for a package without a setup.py, as gcloud does: the package's name, version 0.0.0."""
    return ProjectMetadata(name=package, version="0.0.0", source="defaults (no setup.py)")


def _literal(node: ast.AST, constants: dict[str, object]) -> object:
    if isinstance(node, ast.Name) and node.id in constants:
        return constants[node.id]
    return ast.literal_eval(node)


def _module_constants(tree: ast.Module) -> dict[str, object]:
    constants: dict[str, object] = {}
    for node in tree.body:
        targets, value = ((node.targets, node.value) if isinstance(node, ast.Assign)
                          else ([node.target], node.value) if isinstance(node, ast.AnnAssign) else ([], None))
        for target in targets:
            if isinstance(target, ast.Name) and value is not None:
                try:
                    constants[target.id] = _literal(value, constants)
                except _UNREADABLE:
                    constants.pop(target.id, None)  # computed: not readable without running the file
    return constants


def _setup_call(tree: ast.Module) -> ast.Call | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if (isinstance(func, ast.Name) and func.id == "setup") or (
                    isinstance(func, ast.Attribute) and func.attr == "setup"
                    and isinstance(func.value, ast.Name) and func.value.id in ("setuptools", "distutils")):
                return node
    return None


def read_setup_py(path: Path) -> ProjectMetadata:
    """Read NAME, VERSION and REQUIRED_PACKAGES (or the `setup()` keywords) from `path` without running it.

    Raises:
        UsageError: the file is missing, unreadable or not Python; ComputedMetadata (a UsageError) when its
            metadata is computed at run time.
    """
    label = str(path)
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise UsageError(f"cannot read setup.py {label}: {err.__class__.__name__}: {err}",
                         hint="pass --setup-py PATH to the trainer's setup.py") from None
    try:
        tree = ast.parse(source, filename=label)
    except SyntaxError as err:
        raise UsageError(f"cannot read setup.py {label}: syntax error on line {err.lineno}: {err.msg}",
                         hint="fix the file; mlsubmit reads it without running it") from None
    constants = _module_constants(tree)
    keywords: dict[str, ast.AST] = {}
    call = _setup_call(tree)
    if call is not None:
        keywords = {kw.arg: kw.value for kw in call.keywords if kw.arg is not None}
    values: dict[str, object] = {}
    for field in ("name", "version", *_OPTIONAL):
        node = keywords.get(field)
        if node is None:
            if _CONSTANTS.get(field) in constants:
                values[field] = constants[_CONSTANTS[field]]
            continue
        try:
            values[field] = _literal(node, constants)
        except _UNREADABLE:
            raise ComputedMetadata(
                f"cannot read `{field}` from setup.py {label} without running it "
                f"(line {node.lineno}: {ast.get_source_segment(source, node)})",
                hint=f"assign it a literal at module level, e.g. {_CONSTANTS.get(field, field.upper())} = …, "
                     f"and pass that name to setup()") from None
    for field in ("name", "version"):
        if field not in values:
            expanded = call is not None and any(kw.arg is None for kw in call.keywords)  # setup(**config)
            raise (ComputedMetadata if expanded else UsageError)(
                f"setup.py {label} names no {field}",
                hint=f"add {_CONSTANTS[field]} = '…' at module level and setup({field}={_CONSTANTS[field]})")
    requires = values.get("install_requires", [])
    if isinstance(requires, str):
        requires = [line for line in (r.strip() for r in requires.splitlines()) if line and line[0] != "#"]
    if not isinstance(requires, (list, tuple)) or not all(isinstance(r, str) for r in requires):
        raise invalid_value(f"install_requires in {label}", requires, "a list of requirement strings")
    for field in ("name", "version", "python_requires", "description"):
        if field in values and not isinstance(values[field], str):
            raise invalid_value(f"{field} in {label}", values[field], "a string")
    return ProjectMetadata(name=values["name"], version=values["version"], requires=tuple(requires),
                           python_requires=values.get("python_requires"), summary=values.get("description"),
                           source=label)
