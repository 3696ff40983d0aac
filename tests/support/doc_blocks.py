"""The fenced blocks of the docs (README.md and docs/**/*.md), each with the marker that says how a test covers it.

The convention (docs/architecture.md, "Examples in the docs"): every shell block — ```console (commands after
`$ `, then what they print) or ```bash (commands only) — is preceded by one HTML comment, invisible on the page:

    <!-- doc-test: run -->                                  tests/test_docs_examples.py runs each `$ mlsubmit …`
                                                            line and checks the lines shown below it
    <!-- doc-test: same as tests/test_x.py::test_y -->      that test runs the same job (it must exist)
    <!-- doc-test: not run: why -->                         e.g. it needs a real Google Cloud project

Every other block names what it holds (```text, ```yaml, ```python); a block without a language is refused.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHELL = {"bash", "sh", "shell", "console", "zsh"}
MARKER = re.compile(r"<!--\s*doc-test:\s*(run|same as|not run:)\s*(.*?)\s*-->")
TEST_REF = re.compile(r"(tests/[\w/]+\.py)::(test_\w+)")
FENCE = re.compile(r"^(\s*)(`{3,})(\S*)\s*$")


@dataclass(frozen=True)
class Block:
    page: str  # relative to the repository root
    line: int  # the opening fence's line, 1-based
    language: str
    body: str
    marker: str | None  # "run", "same as", "not run:" or None
    marker_text: str

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(page: Path) -> list[Block]:
    lines = page.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, ticks, language = opening.groups()
        end = i + 1
        while end < len(lines) and not re.match(rf"^\s*{ticks}\s*$", lines[end]):
            end += 1
        body = "\n".join(line[len(indent):] if line.startswith(indent) else line.lstrip() for line in lines[i + 1:end])
        previous = next((lines[j] for j in range(i - 1, -1, -1) if lines[j].strip()), "")
        marker = MARKER.search(previous)
        found.append(Block(str(page.relative_to(ROOT)), i + 1, language, body,
                           marker.group(1) if marker else None, marker.group(2) if marker else ""))
        i = end + 1
    return found


def all_blocks() -> list[Block]:
    return [block for page in pages() for block in blocks(page)]


def defined_test(path: str, name: str) -> bool:
    """Whether the test file defines `name` or imports it (the engine files import a shared suite)."""
    file = ROOT / path
    if not file.is_file():
        return False
    tree = ast.parse(file.read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return True
        if isinstance(node, ast.ImportFrom) and any((alias.asname or alias.name) == name for alias in node.names):
            return True
    return False


@dataclass(frozen=True)
class Command:
    argv_text: str  # the command after `$ `, continuation lines joined
    expected: list[str]  # the lines the page shows below it
    exit_code: int


def console_commands(body: str) -> list[Command]:
    """The `$ ` commands of a console block with the lines shown after each. A command may end in
    `# exit N` (the exit code it must give, default 0) and continue over lines ending in a backslash."""
    commands: list[Command] = []
    lines = body.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            i += 1
            continue
        text = lines[i][2:]
        while text.endswith("\\") and i + 1 < len(lines):
            i += 1
            text = text[:-1] + " " + lines[i].strip()
        exit_code = 0
        wanted = re.search(r"\s+#\s*exit\s+(\d+)\s*$", text)
        if wanted:
            exit_code, text = int(wanted.group(1)), text[:wanted.start()]
        expected = []
        i += 1
        while i < len(lines) and not lines[i].startswith("$ "):
            expected.append(lines[i])
            i += 1
        commands.append(Command(text.strip(), expected, exit_code))
    return commands


def missing_lines(expected: list[str], output: str) -> list[str]:
    """The shown lines the real output lacks, in order; `…` alone skips lines, `…` inside a line matches anything."""
    actual = [line.rstrip() for line in output.splitlines()]
    missing, position = [], 0
    for line in expected:
        if not line.strip() or line.strip() == "…":
            continue
        pattern = re.compile(".*".join(re.escape(part) for part in line.rstrip().split("…")))
        hit = next((k for k in range(position, len(actual)) if pattern.fullmatch(actual[k])), None)
        if hit is None:
            missing.append(line)
        else:
            position = hit + 1
    return missing
