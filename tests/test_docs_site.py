"""The docs site builds clean in strict mode (a broken link or anchor, a page missing from the nav fails), the README
stays a front page that links into it, and the troubleshooting page names every error class of the code."""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys

import pytest

from tests.support.trainer_run import ROOT

README = ROOT / "README.md"


def test_the_site_builds_in_strict_mode(tmp_path):
    pytest.importorskip("mkdocs", reason="mkdocs is not installed: pip install 'mlsubmit[docs]' (the test extra has it)")
    pytest.importorskip("material", reason="mkdocs-material is not installed: pip install 'mlsubmit[docs]'")
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file",
                            str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
                           capture_output=True, text=True, timeout=120, cwd=tmp_path)
    problems = [line for line in build.stderr.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert build.returncode == 0, "mkdocs build --strict failed:\n" + "\n".join(problems or [build.stderr[-3000:]])
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").is_file()


def test_the_readme_is_a_short_front_page_whose_links_resolve():
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; the front page keeps to 250 (move detail to docs/)"
    broken = []
    for number, line in enumerate(lines, 1):
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            if not (ROOT / target.split("#")[0]).exists():
                broken.append(f"README.md:{number}: {target}")
    assert not broken, "links to nothing:\n" + "\n".join(broken)
    # "submit my own trainer to Vertex AI" is one click from the front page
    assert "(docs/byo-trainer.md)" in text.split("## Documentation")[0]
    assert "Gemini Enterprise Agent Platform" in text and "aiplatform.googleapis.com/v1" in text


def _error_classes() -> dict[str, str]:
    """Every class of the one error family in mlsubmit/ (and the CLI's one-line usage error): name → module."""
    family = {"MlsubmitError", "UsageError", "OperationFailed"}
    found: dict[str, str] = {}
    for path in sorted((ROOT / "mlsubmit").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = {getattr(base, "id", getattr(base, "attr", "")) for base in node.bases}
                if node.name in family or bases & (family | {"UsageError"}) or node.name == "OneLineUsageError":
                    found[node.name] = module
    return found


def test_troubleshooting_names_every_error_class_with_its_exit_code():
    page = (ROOT / "docs" / "troubleshooting.md").read_text()
    rows = {m.group(1): (m.group(2), int(m.group(3)))
            for m in re.finditer(r"^\| `(\w+)` \| `([\w/.]+)` \| (\d+) \|", page, re.M)}
    classes = _error_classes()
    assert {"MlsubmitError", "UsageError", "OperationFailed"} <= set(classes)
    problems = []
    for name, module in classes.items():
        if name not in rows:
            problems.append(f"{name} ({module}) is not in docs/troubleshooting.md's table of error classes")
            continue
        cls = getattr(importlib.import_module(module), name)
        code = getattr(cls, "exit_code", 2)
        where = module.replace(".", "/") + ".py"
        if rows[name] != (where, code):
            problems.append(f"docs/troubleshooting.md says {name} is in {rows[name][0]} with exit code "
                            f"{rows[name][1]}; the code: {where}, exit code {code}")
    problems += [f"docs/troubleshooting.md names {name}, which the code no longer has" for name in set(rows) - set(classes)]
    assert not problems, "\n".join(problems)
