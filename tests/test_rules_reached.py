"""Every registered rule is reached where it says it is checked, and a test makes it fire.

The recorder (rules_fired/rules_recorder.py) notes every problem a process of the test run reports, and
whether it was reported on the synth path: into a fleet's diagnostics, or out of building the fleet or
`synth`. A rule whose check is never called by synth (only by a test, say) is listed here, as is a rule no
test makes fire. This test runs last and only when the whole suite runs with the upstream CRDs beside the
clone: a subset fires a subset, and the tests that need the CRDs skip without them.
"""

from __future__ import annotations

import pytest
from conftest import CRDS, ROOT, RULES_SINK
from kubetrain.rules.catalog import every_rule
from rules_recorder import fired


def _whole_suite(session: pytest.Session) -> bool:
    options = session.config.option
    collected = {item.path.name for item in session.items}
    return not options.keyword and not options.markexpr and \
        collected >= {path.name for path in (ROOT / "tests").glob("test_*.py")}


def test_every_rule_is_reported_where_it_is_checked(request: pytest.FixtureRequest) -> None:
    if not _whole_suite(request.session):
        pytest.skip("runs in the full suite (plain `pytest`): a part of it, the fast tier included, fires a part of "
                    "the rules")
    if not CRDS.is_dir():
        pytest.skip(f"needs the upstream CRDs at {CRDS}: the tests that make some rules fire skip without them")
    found = fired(RULES_SINK)
    rules = every_rule()
    not_by_synth = [r.code for r in rules if "synth" in r.checked_by and r.code not in found["synth"]]
    never = [r.code for r in rules if r.code not in found["synth"] | found["reported"]]
    assert not_by_synth == [], f"checked by synth, but no test saw synth report them: {', '.join(not_by_synth)}"
    assert never == [], f"registered, but no test makes them fire: {', '.join(never)}"
