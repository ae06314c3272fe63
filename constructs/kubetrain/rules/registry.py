"""The rule registry: every check kubetrain makes, with its code, severity, rationale, fix and source.

A rule's code is what a user sees in a problem line (`... [KT106] fix: ...`), what `kubetrain
explain CODE` prints and what the site's rule reference and troubleshooting pages show (generated
from here). Modules declare the rules they check next to the checks, with `register`; the
registry only collects them. Code ranges keep areas apart:

    KT0xx  input shape (unknown field, missing field, bad value) and object names
    KT1xx  jobs and their pods
    KT2xx  the run config (checked at compile time and again at pod start)
    KT3xx  run-local
    KT4xx  the platform: node pools, storage, queues, monitoring
    KT5xx  GitOps delivery
    KT6xx  output: synth's output folder, validation of the emitted objects
    KT7xx  launch targets (one operator's contract)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]


Stage = Literal["synth", "pod", "run-local"]


@dataclass(frozen=True)
class Rule:
    """One check. `targets` names the launch targets it applies to; empty means all of them. `checked_by` says
    where it runs: `kubetrain synth` (and so in the pull request), the pod as it starts (`python -m training`),
    or `kubetrain run-local`; a test keeps every rule reached where it says."""

    code: str
    severity: Severity
    title: str
    rationale: str
    fix: str
    source: str
    targets: tuple[str, ...] = ()
    checked_by: tuple[Stage, ...] = ("synth",)


_RULES: dict[str, Rule] = {}


def register(code: str, severity: Severity, title: str, *, rationale: str, fix: str, source: str,
             targets: tuple[str, ...] = (), checked_by: tuple[Stage, ...] = ("synth",)) -> Rule:
    """Declare a rule; returns it so a module can keep it as a constant (`SHM_FITS = register(...)`)."""
    rule = Rule(code, severity, title, rationale, fix, source, targets, checked_by)
    if _RULES.get(code, rule) != rule:
        raise ValueError(f"rule {code} is declared twice, differently")
    _RULES[code] = rule
    return rule


def get(code: str) -> Rule | None:
    return _RULES.get(code)


def all_rules() -> list[Rule]:
    """Every registered rule, by code."""
    return [_RULES[code] for code in sorted(_RULES)]


def severity(code: str) -> Severity:
    """A problem's severity comes from its rule; codes without a rule (none should exist) are errors."""
    rule = _RULES.get(code)
    return rule.severity if rule else "error"
