"""Every rule kubetrain has: the registry after every module that declares rules is imported.

Rules are declared beside their checks, all over the package; the catalog imports the whole
package once so `kubetrain rules`, `kubetrain explain` and the site's rule reference see all of them.
"""

from __future__ import annotations

import importlib
import pkgutil

import kubetrain
from kubetrain.rules.registry import Rule, all_rules


def every_rule() -> list[Rule]:
    for module in pkgutil.walk_packages(kubetrain.__path__, "kubetrain."):
        if not module.name.endswith("__main__"):  # running it would start the CLI
            importlib.import_module(module.name)
    return all_rules()


def explanation(rule: Rule) -> list[tuple[str, str]]:
    """What `kubetrain explain CODE` prints after the rule's title, line by line, and what the site's rule reference
    shows of it: one text, so the two never differ."""
    return [("why", rule.rationale), ("fix", rule.fix), ("source", rule.source),
            ("targets", ", ".join(rule.targets) if rule.targets else "all"),
            ("checked by", ", ".join(rule.checked_by))]


def markdown_table() -> str:
    """The rule table (`kubetrain rules --markdown`): one row per rule, with its code, severity, title and targets."""
    lines = ["| code | severity | rule | targets |", "|---|---|---|---|"]
    for rule in every_rule():
        lines.append(f"| {rule.code} | {rule.severity} | {rule.title} | {', '.join(rule.targets) or 'all'} |")
    return "\n".join(lines) + "\n"
