"""Problems found while the fleet is defined, kept until synth reports them all at once.

Constructs do not raise on a rule violation: they record every problem of their definition
here (on the cdk8s App) and emit nothing, so one synth reports every problem of every job.
Warnings are recorded the same way and printed without stopping synth (unless `--strict`).
"""

from __future__ import annotations

from dataclasses import dataclass

from constructs import Construct
from kubetrain.rules.registry import Severity, severity
from training.problems import ConfigError, Problem


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
        self.findings: list[Finding] = []

    def report(self, where: str, problems: list[Problem]) -> bool:
        """Record problems; True when any of them is an error (the definition must not be emitted)."""
        found = [Finding(where, p) for p in problems]
        self.findings.extend(found)
        return any(f.severity == "error" for f in found)

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


def diagnostics(scope: Construct) -> Diagnostics:
    """The diagnostics of the app that `scope` belongs to."""
    root = scope.node.root
    found = getattr(root, "_kubetrain_diagnostics", None)
    if found is None:
        found = Diagnostics()
        root._kubetrain_diagnostics = found
    return found
