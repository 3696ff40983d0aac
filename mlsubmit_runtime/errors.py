"""The runtime's one error family: bad input a trainer reports as one line with exit code 2."""

from __future__ import annotations


class InputError(Exception):
    """Bad input the user must fix (data, devices, a job dir): one line, exit code 2, before training starts."""

    exit_code = 2
