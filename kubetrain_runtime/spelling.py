"""The name a misspelt one meant: one suggestion for every "did you mean" the project prints.

Names are compared folded: case, '_' against '-', and the letters people type for the digits they resemble
(O for 0, I and l for 1) do not count, so `KT1O6` finds KT106 and `dev/tiny_gpt` finds dev/tiny-gpt; what
remains is compared by difflib's ratio. This module imports nothing of the project.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

_FOLD = str.maketrans({"o": "0", "i": "1", "l": "1", "_": "-"})


def fold(name: str) -> str:
    """`name` with case, '_'/'-' and the O/0, I/1, l/1 confusions taken out."""
    return name.lower().translate(_FOLD)


def closest(name: str, choices: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The choice `name` most likely meant: one equal to it once folded, else the nearest by difflib's ratio of
    the folded names (at least `cutoff`), else None. `name` itself is never suggested."""
    by_fold: dict[str, str] = {}
    for choice in choices:
        if choice != name:
            by_fold.setdefault(fold(choice), choice)
    folded = fold(name)
    if folded in by_fold:
        return by_fold[folded]
    near = difflib.get_close_matches(folded, list(by_fold), n=1, cutoff=cutoff)
    return by_fold[near[0]] if near else None


def did_you_mean(name: str, choices: Iterable[str], cutoff: float = 0.6, quote: bool = True) -> str:
    """'did you mean 'x'? ' for the closest choice, else ''; to put before a fix."""
    guess = closest(name, choices, cutoff)
    if guess is None:
        return ""
    return f"did you mean {guess!r}? " if quote else f"did you mean {guess}? "
