"""Every registered rule is reached where it says it is checked, and a test makes it fire.

The recorder (rules_recorder.py) notes every problem a process of the test run reports, and whether it was
reported on the synth path: into a fleet's diagnostics, or out of building the fleet or `synth`. A rule whose
check is never called by synth (only by a test, say) is listed here, as is a rule no test makes fire.

This is a check of the whole run, not a test: it reads what every test recorded, in every worker process
pytest-xdist runs, so it runs once all of them are done (the conftest's `pytest_sessionfinish`, in the process
that is not a worker) and only when the whole suite ran with the upstream CRDs beside the clone: a subset fires a
subset, and the tests that need the CRDs skip without them.
"""

from __future__ import annotations

from pathlib import Path

from rules_recorder import fired


def unreached(sink: Path, rules: list) -> list[str]:
    """What is wrong with the record in `sink`, one line each; nothing when every rule was reached."""
    found = fired(sink)
    not_by_synth = [r.code for r in rules if "synth" in r.checked_by and r.code not in found["synth"]]
    never = [r.code for r in rules if r.code not in found["synth"] | found["reported"]]
    problems = []
    if not_by_synth:
        problems.append(f"checked by synth, but no test saw synth report them: {', '.join(not_by_synth)}")
    if never:
        problems.append(f"registered, but no test makes them fire: {', '.join(never)}")
    return problems
