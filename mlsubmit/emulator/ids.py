"""The names in a create request, checked as the services check them before anything is stored.

The real front ends refuse a malformed project id, location, legacy job id or display name with a 400
INVALID_ARGUMENT; the emulator must too, before a job exists anywhere — a name that cannot be stored (a
300-character project id makes a file name too long) would otherwise leave a job behind that no call can
reach. The rules:
- project: an id of at most 30 characters, `[a-z][a-z0-9-]*[a-z0-9]`, or a project number (digits). The real
  service wants 6 to 30; the emulator also takes shorter ids, since offline gcloud sessions commonly run with
  `CLOUDSDK_CORE_PROJECT=p` (the over-long and malformed ids that broke the store are still refused);
- location: a region name such as `us-central1` (lowercase letters, digits and hyphens, at most 63);
- legacy jobId: `^[A-Za-z][A-Za-z0-9_]{0,127}$` (checked with the rest of the body: `plan.legacy_plan`);
- Vertex AI displayName: 1–128 characters.
"""

from __future__ import annotations

import re

from mlsubmit.emulator.errors import field_error

PROJECT_ID = re.compile(r"[a-z](?:[a-z0-9-]{0,28}[a-z0-9])?")
PROJECT_NUMBER = re.compile(r"[1-9][0-9]{0,18}")
LOCATION = re.compile(r"[a-z][a-z0-9-]{0,61}[a-z0-9]")
DISPLAY_NAME_MAX = 128


def _shown(value: str) -> str:
    return repr(value if len(value) <= 40 else value[:37] + "...") + (f" ({len(value)} characters)"
                                                                      if len(value) > 40 else "")


def check_project(project: str) -> None:
    if not (PROJECT_ID.fullmatch(project) or PROJECT_NUMBER.fullmatch(project)):
        raise field_error("name", f"Invalid project id {_shown(project)}: a project id is at most 30 lowercase "
                                  "letters, digits or hyphens, starting with a letter and not ending with a hyphen; "
                                  "or give the project number.")


def check_location(location: str) -> None:
    if not LOCATION.fullmatch(location):
        raise field_error("parent", f"Invalid location {_shown(location)}: expected a region such as "
                                    "'us-central1'.")


def check_display_name(name: str) -> None:
    if len(name) > DISPLAY_NAME_MAX:
        raise field_error("display_name", f"The display name is {len(name)} characters long; at most "
                                          f"{DISPLAY_NAME_MAX} are allowed.")
