"""`kubetrain cost`: one row per job of dist/, as a text table or JSON, and what each pool costs whether used."""

from __future__ import annotations

import json
from typing import Any

from kubetrain.cost.cost_props import DEFAULT_ETTR, DEFAULT_MFU
from kubetrain.cost.estimate import JobCost, Pool
from kubetrain.cost.prices import node_price, price_table, region_of
from kubetrain.model.memory_annotation import describe


def usd(value: float | None, signed: bool = False) -> str:
    if value is None:
        return "-"
    sign = ("+" if value >= 0 else "-") if signed else ("-" if value < 0 else "")
    return f"{sign}${abs(value):,.0f}" if abs(value) >= 100 else f"{sign}${abs(value):,.2f}"


def number(value: float | None, signed: bool = False, unit: str = "") -> str:
    if value is None:
        return "-"
    text = f"{value:+,.1f}" if signed else f"{value:,.1f}"
    return text + unit


def _si(value: float | None) -> str:
    if value is None:
        return "-"
    for factor, suffix in ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if value >= factor:
            return f"{value / factor:.3g}{suffix}"
    return f"{value:.3g}"


def _span(low: Any, high: Any, fmt: Any) -> str:
    return fmt(high) if low == high else f"{fmt(low)}-{fmt(high)}"


def json_rows(costs: list[JobCost]) -> str:
    return json.dumps([cost.row() for cost in costs], indent=1) + "\n"


COLUMNS = ("cluster", "namespace", "job", "instance", "capacity", "nodes", "GPUs", "$/node-h", "tokens", "FLOPs",
           "MFU", "ETTR", "hours", "GPU-h", "$", "$ marginal")


def _cells(cost: JobCost) -> list[str]:
    low, high = cost.node_range
    per_pod = cost.shape.accelerators_per_pod
    has_work = cost.work is not None
    return [cost.cluster, cost.namespace, cost.job, cost.instance_type or "-", cost.capacity_type or "-",
            _span(low, high, str), _span(low * per_pod, high * per_pod, str),
            usd(cost.price.usd) if cost.price else "-",
            _si(cost.work.tokens) if has_work else "-", f"{cost.work.flops:.3g}".replace("e+", "e") if has_work else "-",
            f"{cost.estimate.mfu:.2f}" if has_work else "-", f"{cost.estimate.ettr:.2f}" if has_work else "-",
            _span(cost.hours(high), cost.hours(low), number) if has_work else "-",
            number(cost.gpu_hours), usd(cost.usd), usd(cost.marginal_usd)]


def table(rows: list[list[str]], header: tuple[str, ...]) -> list[str]:
    widths = [max(len(r[i]) for r in [list(header), *rows]) for i in range(len(header))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
            for row in [list(header), *rows]]


def pool_line(pool: Pool) -> str | None:
    """What a pool's reserved (or static) nodes cost an hour whether jobs use them or not."""
    if not pool.reserved_nodes:
        return None
    regions = {region for zone in pool.zones if (region := region_of(zone))}
    price = node_price(pool.instance_types, regions.pop() if len(regions) == 1 else None, pool.capacity_type,
                       pool.pricing, pool.zone_ids)
    where = f"{pool.cluster}/{pool.name}: {pool.reserved_nodes} x {price.instance_type if price else '?'} " \
            f"{pool.capacity_type}"
    if price is None:
        return f"{where}, paid whether used or not (no price known)"
    hourly = pool.reserved_nodes * price.usd
    return (f"{where} at {usd(price.usd)}/node-h ({price.basis}): {usd(hourly)}/h, {usd(hourly * 24)}/day paid "
            "whether used or not; a job's dollars on these nodes are sunk, not marginal")


def render_text(costs: list[JobCost], pools: list[Pool]) -> str:
    lines = table([_cells(cost) for cost in costs], COLUMNS)
    lines += [line for pool in pools if (line := pool_line(pool))]
    lines += [f"{'/'.join(cost.key)}: {note}" for cost in costs for note in cost.notes]
    lines += [f"{'/'.join(cost.key)}: memory {describe(cost.memory)}" for cost in costs if cost.memory]
    sources = price_table().sources
    lines.append("prices: " + "; ".join(f"{name} ({source['rate']}, as of {source['as_of']})"
                                        for name, source in sources.items()) +
                 " (kubetrain/cost/prices.json; spot is a snapshot)")
    lines.append(f"assumed unless a job's estimate says otherwise: MFU {DEFAULT_MFU:.2f} (torchtitan, Llama 3.1 8B "
                 f"on H100: 33-39 %), ETTR {DEFAULT_ETTR:.2f} (Llama 3 pre-training: > 90 %); hours = FLOPs / "
                 "(GPUs x peak x MFU x ETTR)")
    return "\n".join(lines) + "\n"
