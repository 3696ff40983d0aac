"""Which requirements of installed distributions an environment lacks: one rule, read from the installed metadata by
that environment's own Python (no pip), for the job environments here and the local venvs (mlsubmit.packaging)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from mlsubmit.errors import UsageError

# Run by an environment's python: the requirements of distributions (argv[1], a JSON list) that neither they nor the
# environment satisfy. A requirement with extras counts as missing (pip installs what its extras add). Python 3.7
# images have importlib_metadata, not .metadata.
_MISSING = """\
import json, re, sys
try:
    import importlib.metadata as md
except ImportError:
    import importlib_metadata as md
try:
    from packaging.requirements import Requirement
except ImportError:
    from pip._vendor.packaging.requirements import Requirement
canonical = lambda name: re.sub(r"[-_.]+", "-", name).lower()
names = json.loads(sys.argv[1])
own = {canonical(name) for name in names}
missing = set()
for name in names:
    for text in md.distribution(name).requires or []:
        req = Requirement(text)
        if canonical(req.name) in own or (req.marker is not None and not req.marker.evaluate({"extra": ""})):
            continue
        try:
            version = md.version(req.name)
        except md.PackageNotFoundError:
            missing.add(text)
            continue
        if req.extras or (req.specifier and not req.specifier.contains(version, prereleases=True)):
            missing.add(text)
print(json.dumps(sorted(missing)))
"""


def missing_requirements(python: Path, distributions: list[str], *, cwd: Path | None = None,
                         env: dict[str, str] | None = None) -> list[str]:
    """The requirements of the installed `distributions` that `python`'s environment does not satisfy (with env
    None, run isolated: -I, no user site or PYTHON* variables)."""
    done = subprocess.run([str(python), *(["-I"] if env is None else []), "-c", _MISSING, json.dumps(distributions)],
                          capture_output=True, text=True, cwd=cwd, env=env, stdin=subprocess.DEVNULL, timeout=120)
    if done.returncode != 0:
        raise UsageError(f"cannot read the requirements of {', '.join(distributions)} after installing them: "
                         f"{(done.stderr.strip().splitlines() or ['?'])[-1]}")
    return json.loads(done.stdout.strip().splitlines()[-1])
