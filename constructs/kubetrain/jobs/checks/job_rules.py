"""Job rules: a rule of the registry with the check that finds its violations in a resolved job.

A check gets the resolved job (`JobSpec`: validated props, namespace, instance type) and yields
(field path, message) or (field path, message, fix) for each violation; `JobRules.problems` turns them
into Problems carrying the rule's code (and its registered fix when none is given). Every rule of
a job runs, so all its problems are reported together. Sources: kubetrain.rules.sources.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from kubetrain.jobs.spec import JobSpec
from kubetrain.rules.registry import Rule, Severity, Stage, register
from kubetrain_runtime.problems import Problem

Violation = tuple[str, str] | tuple[str, str, str]
Check = Callable[[JobSpec], Iterator[Violation]]


class JobRules:
    """The rules one module declares, each with its check, in the order declared: the order of their problems."""

    def __init__(self) -> None:
        self._checks: list[tuple[Rule, Check]] = []

    def rule(self, code: str, severity: Severity, title: str, *, rationale: str, fix: str,
             source: str, checked_by: tuple[Stage, ...] = ("synth",)) -> Callable[[Check], Check]:
        """Register the rule and make the decorated function its check (`checked_by`: where else it runs too)."""
        rule = register(code, severity, title, rationale=rationale, fix=fix, source=source, checked_by=checked_by)

        def decorate(check: Check) -> Check:
            self._checks.append((rule, check))
            return check

        return decorate

    def problems(self, job: JobSpec) -> list[Problem]:
        return [Problem(rule.code, path, message, fix[0] if fix else rule.fix)
                for rule, check in self._checks for path, message, *fix in check(job)]
