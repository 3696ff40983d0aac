"""Run a command that must meet file permissions as a user does, even when the suite runs as root.

Root reads a chmod-000 file through two capabilities, CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH. Running the command
as another user (nobody) would take them away too, but that user must then reach the interpreter, the virtual
environment and the checkout — which a clone under a 0700 home or `mktemp -d` does not allow, nor a pyenv Python
under /root. So the command keeps the suite's own user and drops just those two capabilities from its bounding set
before exec: it reaches everything the suite reaches (as owner), and is refused what any user would be refused.

Example:
    >>> subprocess.run(command, **as_a_user())  # no change unless the suite runs as root
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

PR_CAPBSET_DROP = 24  # <linux/prctl.h>
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2  # <linux/capability.h>


def as_a_user() -> dict[str, Any]:
    """Keyword arguments for subprocess.run/Popen: none for an ordinary user; as root, a preexec_fn that drops the
    capabilities that let root read and search what its mode forbids."""
    if os.geteuid() != 0:
        return {}
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: nothing to load between fork and exec

    def drop() -> None:
        for capability in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
            if prctl(PR_CAPBSET_DROP, capability, 0, 0, 0) != 0:
                error = ctypes.get_errno()
                raise OSError(error, f"prctl(PR_CAPBSET_DROP, {capability}): {os.strerror(error)}")

    return {"preexec_fn": drop}
