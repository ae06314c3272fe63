"""Which node counts of a range pass a divisibility rule, found without walking the range.

An elastic job may run at any node count from `min_nodes` to `max_nodes` (up to 2^31-1), so a
rule over every world size must cost what the answer costs, not what the range costs: the
passing counts are the divisors of one number, and the failing ones are reported as a few
intervals.
"""

from __future__ import annotations

from math import isqrt


def divisors(n: int) -> list[int]:
    """Every positive divisor of n > 0, ascending (O(sqrt n))."""
    small = [d for d in range(1, isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def gaps(counts: range, passing: list[int]) -> list[tuple[int, int]]:
    """The intervals of `counts` not in `passing` (sorted), as inclusive (first, last) pairs."""
    out, start = [], counts.start
    for value in passing:
        if value < counts.start or value >= counts.stop:
            continue
        if value > start:
            out.append((start, value - 1))
        start = value + 1
    if start < counts.stop:
        out.append((start, counts.stop - 1))
    return out


def describe(intervals: list[tuple[int, int]], most: int = 6) -> str:
    """[(3, 3), (5, 7)] -> '3, 5-7'; long lists end in ', ...'."""
    words = [str(a) if a == b else f"{a}-{b}" for a, b in intervals[:most]]
    return ", ".join(words) + (", ..." if len(intervals) > most else "")


def counts_dividing(counts: range, total: int, per_node: int) -> list[int]:
    """Node counts n in `counts` for which n * per_node divides `total`."""
    if total % per_node:
        return []
    return [d for d in divisors(total // per_node) if d in counts]
