"""Problems found while the fleet is defined, kept until synth reports them all at once.

Constructs do not raise on a rule violation: they record every problem of their definition
here (the fleet's, kubetrain.state) and emit nothing, so one synth reports every problem of every job.
Warnings are recorded the same way and printed without stopping synth (unless `--strict`).
What needs the whole fleet (a job's admission, whose cohort may gain members later) is checked by synth
once the fleet is defined (kubetrain.pipeline, step 2), not here.
"""

from __future__ import annotations

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


class Diagnostics:
    def __init__(self) -> None:
        self._recorded: list[Finding] = []

    def report(self, where: str, problems: list[Problem]) -> bool:
        """Record problems; True when any of them is an error (the definition must not be emitted)."""
        found = [Finding(where, p) for p in problems]
        self._recorded.extend(found)
        return any(f.severity == "error" for f in found)

    @property
    def findings(self) -> list[Finding]:
        """Everything recorded, in order."""
        return list(self._recorded)


class DefinitionError(ConfigError):
    """Every error of a fleet definition, from however many constructs."""

    def __init__(self, findings: list[Finding]):
        self.findings = findings
        self.where = ""
        self.problems = [f.problem for f in findings]
        Exception.__init__(self, "\n".join(self.lines()))

    def lines(self) -> list[str]:
        return [f.format() for f in self.findings]
