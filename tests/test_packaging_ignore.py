"""gitignore semantics of `.gitignore` / `.mlsubmitignore` rules (pure: patterns against paths)."""

from __future__ import annotations

import pytest

from mlsubmit.packaging.ignore import IgnoreFile, compile_line, ignored_by


def decide(lines: list[str], path: str, is_dir: bool = False, base: str = "") -> bool:
    rules = tuple(r for i, line in enumerate(lines) if (r := compile_line(line, f"f:{i + 1}")))
    return ignored_by(path, is_dir, [IgnoreFile(base, rules)]) is not None


@pytest.mark.parametrize("pattern, path, is_dir, ignored", [
    ("*.log", "a.log", False, True),
    ("*.log", "deep/down/a.log", False, True),  # no slash: any level
    ("*.log", "a.log.txt", False, False),
    ("/top.txt", "top.txt", False, True),  # leading slash: anchored
    ("/top.txt", "sub/top.txt", False, False),
    ("doc/*.md", "doc/a.md", False, True),  # a middle slash anchors too
    ("doc/*.md", "x/doc/a.md", False, False),
    ("doc/*.md", "doc/sub/a.md", False, False),  # * does not cross /
    ("**/cache", "a/b/cache", True, True),
    ("**/cache", "cache", True, True),
    ("a/**/z", "a/z", False, True),
    ("a/**/z", "a/b/c/z", False, True),
    ("a/**", "a/b/c", False, True),
    ("a/**", "a", True, False),
    ("out/", "out", True, True),  # trailing slash: directories only
    ("out/", "out", False, False),
    ("file?.txt", "file1.txt", False, True),
    ("file?.txt", "file10.txt", False, False),
    ("[abc].py", "b.py", False, True),
    ("[!abc].py", "b.py", False, False),
    ("[!abc].py", "d.py", False, True),
    ("\\#hash", "#hash", False, True),
    ("# comment", "# comment", False, False),
    ("trailing   ", "trailing", False, True),
    ("", "anything", False, False),
])
def test_pattern(pattern, path, is_dir, ignored):
    assert decide([pattern], path, is_dir) is ignored


def test_last_match_wins_and_negation_reincludes():
    assert decide(["*.log", "!keep.log"], "keep.log") is False
    assert decide(["*.log", "!keep.log"], "drop.log") is True
    assert decide(["!keep.log", "*.log"], "keep.log") is True


def test_patterns_are_relative_to_their_file():
    assert decide(["/x.py"], "pkg/x.py", base="pkg") is True
    assert decide(["/x.py"], "pkg/sub/x.py", base="pkg") is False
    assert decide(["*.py"], "other/x.py", base="pkg") is False  # outside the file's directory


def test_deeper_file_overrides_shallower():
    shallow = IgnoreFile("", (compile_line("*.csv", "root:1"),))
    deep = IgnoreFile("pkg", (compile_line("!data.csv", "pkg:1"),))
    assert ignored_by("pkg/data.csv", False, [shallow, deep]) is None
    assert ignored_by("pkg/other.csv", False, [shallow, deep]) == "root:1"
