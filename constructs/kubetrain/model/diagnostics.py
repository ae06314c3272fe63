"""Problems found while the fleet is defined, kept until synth reports them all at once.

Constructs do not raise on a rule violation: they record every problem of their definition
here (the fleet's, kubetrain.state) and emit nothing, so one synth reports every problem of every job.
Warnings are recorded the same way and printed without stopping synth (unless `--strict`).
A check that needs the whole fleet (a job's admission, whose cohort may gain members later)
is deferred: it runs when the findings are read, again only after the fleet changed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kubetrain.rules.registry import Severity, severity
from kubetrain_runtime.problems import ConfigError, Problem


@dataclass(frozen=True)
class Finding:
    """One problem of one definition (`where` is its construct path, e.g. dev/ml/job)."""

    where: str
    problem: Problem

    @property
    def severity(self) -> Severity:
        return severity(self.problem.code)

    def format(self) -> str:
        return self.problem.format(self.where)


DeferredCheck = Callable[[list[Finding]], list[Finding]]  # given what is recorded, what else the fleet breaks


class Diagnostics:
    def __init__(self) -> None:
        self._recorded: list[Finding] = []
        self._deferred: list[DeferredCheck] = []
        self._changes = 0  # every report and deferral; deferred findings are recomputed when it moves
        self._deferred_found: tuple[int, list[Finding]] = (-1, [])

    def report(self, where: str, problems: list[Problem]) -> bool:
        """Record problems; True when any of them is an error (the definition must not be emitted)."""
        found = [Finding(where, p) for p in problems]
        self._recorded.extend(found)
        self._changes += 1
        return any(f.severity == "error" for f in found)

    def defer(self, check: DeferredCheck) -> None:
        """Run `check` over the whole fleet when the findings are read."""
        self._deferred.append(check)
        self._changes += 1

    @property
    def findings(self) -> list[Finding]:
        """Everything recorded, then what the deferred checks find in the fleet as it is now."""
        changes, found = self._deferred_found
        if changes != self._changes:
            found = [f for check in self._deferred for f in check(list(self._recorded))]
            self._deferred_found = (self._changes, found)
        return [*self._recorded, *found]

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    def raise_errors(self, strict: bool = False) -> None:
        """Raise every error (and with `strict`, every warning) as one DefinitionError."""
        failing = self.findings if strict else self.errors
        if failing:
            raise DefinitionError(failing)


class DefinitionError(ConfigError):
    """Every error of a fleet definition, from however many constructs."""

    def __init__(self, findings: list[Finding]):
        self.findings = findings
        self.where = ""
        self.problems = [f.problem for f in findings]
        Exception.__init__(self, "\n".join(self.lines()))

    def lines(self) -> list[str]:
        return [f.format() for f in self.findings]
