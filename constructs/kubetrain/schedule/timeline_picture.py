"""The timeline picture of `kubetrain simulate --picture`: one lane per ClusterQueue, one row per declared run,
readable in a pull request (PNG or SVG, by the file's suffix).

Drawn from the replica at the estimated durations: per run, its pending stretches (hatched grey), admitted and
waiting for its pool's nodes (amber), running (the lane's colour), each preemption a red cross, and the P90
finish over the replicas a black tick. A lane's background load is a grey area under its runs: how many of
its workloads run at each time. matplotlib is imported only here, on the Agg backend (no display needed).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from kubetrain.schedule.fleet_runs import HOUR
from kubetrain.schedule.forecast import ClusterForecast

FORMATS = (".png", ".svg")
LANE_COLOURS = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#e377c2", "#bcbd22", "#7f7f7f")


def draw(forecasts: Sequence[ClusterForecast], path: Path, replicas: int) -> None:
    """Write the picture to `path` (.png or .svg)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    lanes: list[tuple[str, str, list[str]]] = []  # (cluster, queue, run keys)
    for cluster in forecasts:
        queues = sorted({r.spec.cluster_queue for r in cluster.runs.values()})
        for queue in queues:
            keys = sorted(k for k, r in cluster.runs.items() if r.spec.cluster_queue == queue)
            lanes.append((cluster.cluster, queue, keys))
    rows = sum(len(keys) + 1 for _, _, keys in lanes)  # a run a row, and one for the lane's background load
    end = max([c.nominal.end for c in forecasts] + [0.0]) / HOUR
    p90_end = max([r.p("finished", 0.9) or 0.0 for c in forecasts for r in c.runs.values()] + [end])
    start = min([0.0] + [s.start / HOUR for c in forecasts for s in c.nominal.segments])
    figure = Figure(figsize=(12, 1.2 + 0.42 * rows), layout="constrained")
    axes = figure.add_subplot()
    y = 0.0
    ticks: list[float] = []
    labels: list[str] = []
    by_key = {c.cluster: c for c in forecasts}
    for lane, (cluster_name, queue, keys) in enumerate(lanes):
        colour = LANE_COLOURS[lane % len(LANE_COLOURS)]
        cluster = by_key[cluster_name]
        top = y
        for key in keys:
            run = cluster.runs[key]
            for segment in (s for s in cluster.nominal.segments if s.workload.key == key):
                left, width = segment.start / HOUR, (segment.end - segment.start) / HOUR
                if segment.state == "pending":
                    axes.barh(y, width, left=left, height=0.6, color="#dddddd", hatch="//", edgecolor="#999999",
                              linewidth=0.5)
                elif segment.state == "admitted":
                    axes.barh(y, width, left=left, height=0.6, color="#f5b041", edgecolor="none")
                elif segment.state == "running":
                    axes.barh(y, width, left=left, height=0.6, color=colour, edgecolor="none")
            workload = next(w for w in cluster.nominal.workloads if w.key == key)
            for at in workload.preempted_at:
                axes.plot(at / HOUR, y, marker="X", color="#d62728", markersize=10, zorder=3)
            p90 = run.p("finished", 0.9)
            if p90 is not None:
                axes.plot(p90, y, marker="|", color="black", markersize=14, markeredgewidth=2, zorder=3)
            ticks.append(y)
            labels.append(key.split("/", 1)[1] if len(forecasts) == 1 else key)
            y += 1
        background = [s for s in cluster.nominal.segments if not s.workload.declared and s.state == "running"
                      and s.cluster_queue == queue]
        if background:
            times = sorted({t for s in background for t in (s.start, s.end)})
            counts = [sum(s.start <= t < s.end for s in background) for t in times]
            most = max(counts) or 1
            axes.fill_between([t / HOUR for t in times], [y + 0.35] * len(times),
                              [y + 0.35 - 0.7 * c / most for c in counts], step="post", color="#bbbbbb", linewidth=0)
            ticks.append(y)
            labels.append(f"background (up to {most} running)")
            y += 1
        axes.axhspan(top - 0.5, y - 0.5, color=colour, alpha=0.06, linewidth=0)
        axes.text(1.005, (top + y - 1) / 2, f"{cluster_name}/{queue}" if len(forecasts) > 1 else f"ClusterQueue {queue}",
                  transform=axes.get_yaxis_transform(), va="center", ha="left", fontweight="bold", color=colour)
        axes.axhline(y - 0.5, color="#888888", linewidth=0.6)
    axes.set_yticks(ticks, labels)
    axes.set_ylim(y - 0.5, -0.5)
    axes.set_xlim(start, max(p90_end, end, start + 1.0) * 1.02)
    axes.set_xlabel("hours from now")
    axes.axvline(0.0, color="black", linewidth=0.8, linestyle=":")
    axes.grid(axis="x", color="#dddddd")
    axes.set_axisbelow(True)
    clusters = ", ".join(c.cluster for c in forecasts)
    axes.set_title(f"Predicted schedule of {clusters}: Kueue v0.19.2's scheduler at the estimated durations "
                   f"(P90 finish over {replicas} replicas)", loc="left", fontsize=11)
    figure.legend(handles=[Patch(facecolor="#dddddd", hatch="//", edgecolor="#999999", label="pending"),
                         Patch(color="#f5b041", label="admitted, waiting for nodes"),
                         Patch(color=LANE_COLOURS[0], label="running (its lane's colour)"),
                         Line2D([], [], marker="X", color="#d62728", linestyle="none", markersize=9, label="preempted"),
                         Line2D([], [], marker="|", color="black", linestyle="none", markersize=12,
                                markeredgewidth=2, label="P90 finish")],
                  loc="outside lower center", ncols=5, frameon=False)
    figure.savefig(path, dpi=110)
