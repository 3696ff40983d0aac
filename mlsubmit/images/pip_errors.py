"""pip's own reason for a failed install, in one line: never only its closing `hint: See above for details.`

- a build that failed (a source distribution's setup.py or build backend): the error lines of the build's own output
  (pip's "[N lines of output]" block: `ModuleNotFoundError: No module named 'numpy'`, `error: command 'gcc' failed`);
- a resolution that failed: pip's ERROR lines (`No matching distribution found for helperpkg==0.3`, `Cannot install
  … because these package versions have conflicting dependencies`), the first two;
- else the last lines pip wrote.
"""

from __future__ import annotations


def _tail(text: str, lines: int = 6) -> str:
    kept = [line.strip() for line in text.splitlines() if line.strip()]
    return " | ".join(kept[-lines:]) or "(no output)"


def pip_reason(output: str) -> str:
    """What made pip fail, one line (see the module docstring)."""
    lines = [line.strip(" │╰─>") for line in output.splitlines()]
    starts = [i for i, line in enumerate(lines) if line.strip().endswith("lines of output]")]
    if starts:
        block = [line.strip() for line in lines[starts[-1] + 1:] if line.strip()]
        block = block[:next((i for i, line in enumerate(block) if line == "[end of output]"), len(block))]
        errors = [line for line in block if "Error" in line or line.lower().startswith("error")]
        if errors:
            return " | ".join(errors[-2:])
        if block:
            return " | ".join(block[-3:])
    found = [line.strip() for line in output.splitlines() if line.strip().startswith("ERROR:")]
    if found:
        return "; ".join(line.removeprefix("ERROR:").strip() for line in found[:2])
    return _tail(output)
