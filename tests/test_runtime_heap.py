"""mlsubmit_runtime.heap: the frameworks are imported with the cyclic garbage collector paused, then what they made is
frozen, and the collector is back as it was (each case in a fresh interpreter: freezing the test worker's own heap
would change every test after it)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PROBE = r"""
import gc, json, sys
from mlsubmit_runtime.heap import import_frameworks
if sys.argv[1] == "off":
    gc.disable()
before = gc.get_freeze_count()
import_frameworks(("colorsys", "no_such_framework_here", "xml.dom.minidom"))
print(json.dumps({"enabled": gc.isenabled(), "frozen": gc.get_freeze_count() - before,
                  "imported": [m for m in ("colorsys", "xml.dom.minidom") if m in sys.modules]}))
"""


@pytest.mark.parametrize("collector", ["on", "off"])
def test_the_frameworks_are_imported_frozen_and_the_collector_is_left_as_it_was(collector):
    done = subprocess.run([sys.executable, "-c", PROBE, collector], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    said = json.loads(done.stdout)
    assert said["imported"] == ["colorsys", "xml.dom.minidom"]  # the missing one skipped, the rest imported
    assert said["frozen"] > 1000, said  # the interpreter's objects and the modules' moved to the permanent generation
    assert said["enabled"] is (collector == "on")


def test_a_frozen_process_still_collects_what_it_makes_afterwards():
    probe = ("import gc\nfrom mlsubmit_runtime.heap import loading_frameworks\nwith loading_frameworks():\n"
             "    import colorsys\nclass Node:\n    pass\nfor _ in range(3):\n    a, b = Node(), Node()\n"
             "    a.other, b.other = b, a\ndel a, b\nprint(gc.collect())")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) >= 6  # the three cycles made after the freeze are found and freed
