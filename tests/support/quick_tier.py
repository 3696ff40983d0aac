"""The fast tier: `python3 dev.py test --quick` (pytest `--quick`) runs every test but the heavy ones.

A test is heavy when it is marked `slow` (it trains in a subprocess) or when a measured run of the whole suite on a
2-core machine found it took HEAVY_SECONDS or more (setup + call + teardown: training, a cluster, an image
environment built, a venv installed). Those measured tests are listed by node id in heavy_tests.txt beside this file;
a test missing from the list (a new one) counts as quick until the list is refreshed from a measured run:

    python3 dev.py test --junitxml=report.xml && python3 tests/support/quick_tier.py report.xml

The README's test command stays the whole suite, and so does CI; the fast tier is for the edit-run loop.
"""

from __future__ import annotations

import sys
from pathlib import Path

HEAVY_SECONDS = 1.0
LIST = Path(__file__).with_name("heavy_tests.txt")


def heavy_ids() -> frozenset[str]:
    if not LIST.exists():
        return frozenset()
    return frozenset(line.strip() for line in LIST.read_text().splitlines()
                     if line.strip() and not line.startswith("#"))


def pytest_addoption(parser) -> None:
    parser.addoption("--quick", action="store_true", default=False,
                     help="the fast tier: leave out tests marked slow and those listed in "
                     "tests/support/heavy_tests.txt (measured at ≥ 1 s)")


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "heavy: left out of the fast tier (--quick)")


def pytest_collection_modifyitems(session, config, items) -> None:
    listed = heavy_ids()
    kept, left = [], []
    for item in items:
        heavy = item.get_closest_marker("slow") is not None or _node_id(item.nodeid) in listed
        if heavy:
            item.add_marker("heavy")
        (left if heavy and config.getoption("--quick") else kept).append(item)
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = kept


def _node_id(nodeid: str) -> str:
    """A node id as the list keeps it: from tests/, parameters included (`test_x.py::test_y[a-b]`)."""
    return nodeid.removeprefix("tests/")


def from_report(report: Path) -> list[str]:
    """Node ids of the tests a pytest `--junitxml` report timed at HEAVY_SECONDS or more."""
    import xml.etree.ElementTree as ET

    heavy = []
    for case in ET.parse(report).iter("testcase"):
        if float(case.get("time", 0)) < HEAVY_SECONDS:
            continue
        parts = case.get("classname", "").split(".")
        module = next((i for i, part in enumerate(parts) if part.startswith("test_")), None)
        if module is None:
            continue
        path = "/".join(parts[:module + 1]).removeprefix("tests/") + ".py"
        heavy.append("::".join([path, *parts[module + 1:], case.get("name", "")]))
    return sorted(set(heavy))


if __name__ == "__main__":
    ids = from_report(Path(sys.argv[1]))
    LIST.write_text(f"# tests measured at >= {HEAVY_SECONDS} s in a full run on 2 cores (tests/support/quick_tier.py)\n"
                    + "".join(f"{i}\n" for i in ids))
    print(f"{len(ids)} heavy tests written to {LIST}")
