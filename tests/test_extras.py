"""mlsubmit/extras.py's table against pyproject.toml: every extra a user installs is in it, and each module it names is
one that extra really brings (the test venv holds every extra, so each must be importable here)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from mlsubmit import extras
from mlsubmit.errors import UsageError

ROOT = Path(__file__).resolve().parents[1]
OPTIONAL = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]


def test_the_table_names_every_extra_a_user_installs():
    assert set(extras.MODULES) == set(OPTIONAL) - {"test", "bench"}


@pytest.mark.parametrize("extra", sorted(extras.MODULES))
def test_each_extras_modules_are_found_where_every_extra_is_installed(extra):
    assert extras.missing(extra) == ()


def test_a_missing_module_is_one_line_naming_the_extra_and_the_tool_installs():
    with pytest.raises(UsageError) as raised:
        extras.require("tuning", purpose="a tuning study run here", modules=("no_such_module_mlsubmit_test",))
    line = raised.value.one_line()
    assert "\n" not in line and "a tuning study run here needs no_such_module_mlsubmit_test" in line
    assert "pip install 'mlsubmit[tuning]'" in line and "pipx install --force 'mlsubmit[tuning]'" in line
