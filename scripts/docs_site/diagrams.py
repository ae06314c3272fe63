"""The site's pictures, drawn at build time from the code and the example fleet, never pasted: the layers a job
travels through (tests/test_imports.py's LAYERS and the stops of "How a job travels"), the example fleet's
platform (read from the committed dist/: pools, flavors, queues, cohorts) and the checkpoint tiers and recovery
(the runtime's config fields and exit codes).

Each is an inline SVG coloured by the theme's CSS variables, so one drawing reads in the light and the dark
scheme alike: text is the theme's text colour on its background (or a tint of its accent), which
tests/test_docs_site.py measures in both schemes (WCAG contrast).
"""

from __future__ import annotations

import ast
import html
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHAR_W, LINE_H, PAD, ROW_GAP, COL_GAP = 7.2, 16, 10, 46, 18
# A picture wider than the page's column shrinks to fit it down to this scale (its 11-12 px text stays at 9 px and
# more, which tests/test_docs_site.py checks), then scrolls sideways instead.
MIN_SCALE = 0.8
STYLE = """<style>
.kt-diagram { overflow-x: auto; }
.kt-diagram svg { max-width: 100%; height: auto; font-family: var(--md-text-font-family, sans-serif); }
.kt-diagram .box { fill: var(--md-default-bg-color); stroke: var(--md-default-fg-color--light); stroke-width: 1.2; }
.kt-diagram .accent { fill: var(--md-accent-fg-color--transparent); stroke: var(--md-accent-fg-color); }
.kt-diagram .primary { fill: var(--md-primary-fg-color--transparent, transparent); stroke: var(--md-primary-fg-color); }
.kt-diagram .band { fill: var(--md-code-bg-color); stroke: none; }
.kt-diagram text { fill: var(--md-default-fg-color); font-size: 12px; }
.kt-diagram .label { fill: var(--md-default-fg-color); font-size: 11px; font-style: italic; }
.kt-diagram .edge { stroke: var(--md-default-fg-color--light); stroke-width: 1.2; fill: none; }
.kt-diagram .path { stroke: var(--md-accent-fg-color); stroke-width: 2; fill: none; }
.kt-diagram .arrowhead { fill: var(--md-default-fg-color--light); }
.kt-diagram .stop { fill: var(--md-default-bg-color); stroke: var(--md-accent-fg-color); stroke-width: 2.5; }
.kt-diagram .stop-text { fill: var(--md-default-fg-color); font-size: 11px; font-weight: bold; }
</style>"""


@dataclass
class Node:
    id: str
    lines: list[str]
    kind: str = "box"  # box, accent or primary
    x: float = 0
    y: float = 0
    w: float = 0
    h: float = 0


@dataclass
class Diagram:
    rows: list[list[Node]]
    edges: list[tuple[str, str, str]] = field(default_factory=list)  # from, to, label
    row_labels: list[str] = field(default_factory=list)


def _text(x: float, y: float, text: str, cls: str = "", anchor: str = "middle") -> str:
    cls_attr = f' class="{cls}"' if cls else ""
    return f'<text x="{x:.0f}" y="{y:.0f}" text-anchor="{anchor}"{cls_attr}>{html.escape(text)}</text>'


def render(diagram: Diagram, title: str) -> str:
    """Rows of boxes, top to bottom, centred; edges as arrows from a box's bottom to another's top (or side)."""
    label_w = max((len(label) for label in diagram.row_labels), default=0) * CHAR_W + (PAD * 2 if diagram.row_labels
                                                                                       else 0)
    for row in diagram.rows:
        for node in row:
            node.w = max(len(line) for line in node.lines) * CHAR_W + 2 * PAD
            node.h = len(node.lines) * LINE_H + PAD
    row_w = [sum(node.w for node in row) + COL_GAP * (len(row) - 1) for row in diagram.rows]
    width = label_w + max(row_w) + 2 * PAD
    y = PAD
    parts = []
    for i, row in enumerate(diagram.rows):
        row_h = max((node.h for node in row), default=LINE_H)
        if diagram.row_labels:
            parts.append(f'<rect class="band" x="0" y="{y - 4:.0f}" width="{width:.0f}" height="{row_h + 8:.0f}" '
                         'rx="4"/>')
            parts.append(_text(PAD, y + row_h / 2 + 4, diagram.row_labels[i], "label", "start"))
        x = label_w + PAD + (max(row_w) - row_w[i]) / 2
        for node in row:
            node.x, node.y = x, y + (row_h - node.h) / 2
            x += node.w + COL_GAP
        y += row_h + ROW_GAP
    height = y - ROW_GAP + PAD
    nodes = {node.id: node for row in diagram.rows for node in row}
    for source, target, label in diagram.edges:
        a, b = nodes[source], nodes[target]
        if abs(a.y - b.y) < 1:  # same row: side to side
            left, right = (a, b) if a.x < b.x else (b, a)
            x1, y1, x2, y2 = left.x + left.w, left.y + left.h / 2, right.x, right.y + right.h / 2
            if left is b:
                x1, x2 = x2, x1
        elif a.y < b.y:
            x1, y1, x2, y2 = a.x + a.w / 2, a.y + a.h, b.x + b.w / 2, b.y
        else:
            x1, y1, x2, y2 = a.x + a.w / 2, a.y, b.x + b.w / 2, b.y + b.h
        parts.append(f'<line class="edge" x1="{x1:.0f}" y1="{y1:.0f}" x2="{x2:.0f}" y2="{y2:.0f}" '
                     'marker-end="url(#kt-arrow)"/>')
        if label:
            parts.append(_text((x1 + x2) / 2 + 4, (y1 + y2) / 2 + 4, label, "label", "start"))
    for node in nodes.values():
        parts.append(f'<rect class="box {node.kind}" x="{node.x:.0f}" y="{node.y:.0f}" width="{node.w:.0f}" '
                     f'height="{node.h:.0f}" rx="5"/>')
        for j, line in enumerate(node.lines):
            parts.append(_text(node.x + node.w / 2, node.y + PAD / 2 + LINE_H * (j + 0.75), line))
    return _svg(width, height, title, parts)


def _svg(width: float, height: float, title: str, parts: list[str]) -> str:
    marker = ('<defs><marker id="kt-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
              'orient="auto-start-reverse"><path class="arrowhead" d="M0,0 L10,5 L0,10 z"/></marker></defs>')
    body = "".join(parts)
    return (f'<div class="kt-diagram" markdown="0">{STYLE}<svg xmlns="http://www.w3.org/2000/svg" role="img" '
            f'viewBox="0 0 {width:.0f} {height:.0f}" width="{width:.0f}" style="min-width: {width * MIN_SCALE:.0f}px">'
            f'<title>{html.escape(title)}</title>'
            f'{marker}{body}</svg></div>')


# ---- the layers a job travels through ---------------------------------------------------------------------------

def layers() -> list[tuple[str, ...]]:
    """tests/test_imports.py's LAYERS, bottom first, read without importing the test."""
    tree = ast.parse((ROOT / "tests" / "test_imports.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "LAYERS":
            return [tuple(ast.literal_eval(elt)) for elt in node.value.elts]
    raise LookupError("tests/test_imports.py has no LAYERS")


def _module_of(path: str) -> str:
    """`constructs/kubetrain/jobs/spec.py` -> kubetrain.jobs.spec; `apps/dev.py` -> apps.dev."""
    path = path.removeprefix("constructs/").removesuffix(".py").removesuffix("/")
    return path.replace("/", ".")


def _layer_of(module: str, order: list[tuple[str, ...]]) -> int | None:
    best = None
    for i, names in enumerate(order):
        for name in names:
            if module == name or module.startswith(name + "."):
                if best is None or len(name) > len(best[1]):
                    best = (i, name)
    return best[0] if best else None


def job_stops(page: Path) -> list[tuple[int, str]]:
    """The numbered stops of "How a job travels": (number, the file it names first)."""
    return [(int(number), path) for number, path in
            re.findall(r"^(\d+)\. `([\w/.]+\.py)`", page.read_text(), re.MULTILINE)]


def job_path_svg(page: Path) -> str:
    """The layers, top (the command line) to bottom (the runtime), with the job's stops as numbered markers and
    the path between them."""
    order = layers()
    stops = job_stops(page)
    bands = [("apps (the fleet)", ("apps",))] + [(", ".join(names), names) for names in reversed(order)]
    index = {names: i for i, (_, names) in enumerate(bands)}
    band_of = []
    for number, path in stops:
        module = _module_of(path)
        layer = 0 if module.startswith("apps") else _layer_of(module, order)
        row = 0 if layer == 0 and module.startswith("apps") else index[order[layer]]
        band_of.append((number, path, row))
    label_w = max(len(label) for label, _ in bands) * CHAR_W + 3 * PAD
    band_h, step_w = 26, 40
    short = lambda path: path.removeprefix("constructs/kubetrain/")  # noqa: E731
    files_in = {}
    for number, path, row in band_of:
        files_in.setdefault(row, []).append(f"{number} {short(path)}")
    text_x = label_w + PAD + len(band_of) * step_w
    width = text_x + max((len(", ".join(files)) for files in files_in.values()), default=0) * CHAR_W + 2 * PAD
    parts = []
    for i, (label, _) in enumerate(bands):
        y = PAD + i * band_h
        if i % 2 == 0:
            parts.append(f'<rect class="band" x="0" y="{y:.0f}" width="{width:.0f}" height="{band_h}" rx="3"/>')
        parts.append(_text(PAD, y + band_h / 2 + 4, label, "label", "start"))
        if i in files_in:
            parts.append(_text(text_x, y + band_h / 2 + 4, ", ".join(files_in[i]), "", "start"))
    points = [(label_w + PAD + k * step_w + step_w / 2, PAD + row * band_h + band_h / 2, number)
              for k, (number, _, row) in enumerate(band_of)]
    parts.append('<polyline class="path" points="' + " ".join(f"{x:.0f},{y:.0f}" for x, y, _ in points) + '"/>')
    for x, y, number in points:
        parts.append(f'<circle class="stop" cx="{x:.0f}" cy="{y:.0f}" r="9"/>')
        parts.append(_text(x, y + 4, str(number), "stop-text"))
    return _svg(width, PAD * 2 + len(bands) * band_h, "The path of one job through the layers", parts)


# ---- the example fleet's platform -------------------------------------------------------------------------------

def _objects(cluster_dir: Path) -> list[dict]:
    found = []
    for path in sorted(cluster_dir.rglob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if isinstance(document, dict):
                found.append(document)
    return found


def _gpus(quotas: dict) -> str:
    for resource in quotas.get("resources", []):
        if resource["name"].endswith("/gpu") and str(resource["nominalQuota"]) != "0":
            return f"{resource['nominalQuota']} GPUs"
    return ""


def fleet_svg(dist: Path, cluster: str) -> str:
    """One cluster of the committed fleet: cohorts, ClusterQueues (nominal GPU quota), LocalQueues, flavors and
    the Karpenter NodePools they stand for, with the jobs queued on each LocalQueue."""
    objects = _objects(dist / cluster)
    by_kind: dict[str, list[dict]] = {}
    for obj in objects:
        by_kind.setdefault(obj.get("kind", ""), []).append(obj)
    name = lambda obj: obj["metadata"]["name"]  # noqa: E731
    cohorts = [Node(f"cohort/{name(c)}", [f"Cohort {name(c)}"], "primary") for c in by_kind.get("Cohort", [])]
    queues, local, flavors, pools, edges = [], [], [], [], []
    for cq in by_kind.get("ClusterQueue", []):
        spec = cq["spec"]
        gpus = [_gpus(f) for group in spec.get("resourceGroups", []) for f in group["flavors"]]
        queues.append(Node(f"cq/{name(cq)}", [f"ClusterQueue {name(cq)}", ", ".join(g for g in gpus if g)], "accent"))
        if spec.get("cohortName"):
            edges.append((f"cq/{name(cq)}", f"cohort/{spec['cohortName']}", ""))
        for group in spec.get("resourceGroups", []):
            for flavor in group["flavors"]:
                edges.append((f"cq/{name(cq)}", f"flavor/{flavor['name']}", ""))
    jobs_on: dict[str, list[str]] = {}
    for obj in objects:
        queue = obj.get("metadata", {}).get("labels", {}).get("kueue.x-k8s.io/queue-name")
        if queue:
            jobs_on.setdefault(queue, []).append(obj["metadata"].get("labels", {}).get("kubetrain.dev/job",
                                                                                      name(obj)))
    for lq in by_kind.get("LocalQueue", []):
        jobs = sorted(set(jobs_on.get(name(lq), [])))
        local.append(Node(f"lq/{name(lq)}", [f"LocalQueue {name(lq)}", *(f"job {job}" for job in jobs)]))
        edges.append((f"lq/{name(lq)}", f"cq/{lq['spec']['clusterQueue']}", ""))
    pool_names = {name(p) for p in by_kind.get("NodePool", [])}
    for flavor in by_kind.get("ResourceFlavor", []):
        flavors.append(Node(f"flavor/{name(flavor)}", [f"ResourceFlavor {name(flavor)}"]))
        pool = flavor["spec"].get("nodeLabels", {}).get("karpenter.sh/nodepool")
        if pool in pool_names:
            edges.append((f"flavor/{name(flavor)}", f"pool/{pool}", ""))
    for pool in by_kind.get("NodePool", []):
        notes = pool["metadata"].get("annotations", {})
        types = [req["values"] for req in pool["spec"]["template"]["spec"].get("requirements", [])
                 if req["key"] == "node.kubernetes.io/instance-type"]
        capacity = notes.get("kubetrain.dev/capacity-nodes", pool["spec"].get("limits", {}).get("nodes", ""))
        pools.append(Node(f"pool/{name(pool)}", [f"NodePool {name(pool)}", ", ".join(types[0]) if types else "",
                                                 f"up to {capacity} nodes" if capacity else ""]))
        pools[-1].lines = [line for line in pools[-1].lines if line]
    rows = [row for row in (cohorts, queues, local + flavors, pools) if row]
    labels = [label for label, row in zip(("cohorts", "cluster queues", "queues, flavors", "node pools"),
                                          (cohorts, queues, local + flavors, pools)) if row]
    known = {node.id for row in rows for node in row}
    edges = [edge for edge in edges if edge[0] in known and edge[1] in known]
    return render(Diagram(rows, edges, labels), f"The {cluster} cluster's platform")


# ---- checkpoint tiers and recovery ------------------------------------------------------------------------------

def checkpoint_svg() -> str:
    """The two tiers as the runtime config describes them, and what each way a run ends leads to, by the
    runtime's own exit codes."""
    from kubetrain_runtime import failures
    from kubetrain_runtime.runtime_config import CheckpointConfig

    fields = CheckpointConfig.model_fields
    first = lambda text: text.split(";")[0].split(":")[0].rstrip(".")  # noqa: E731
    step = Node("step", ["a training step (any loop on kubetrain_runtime.Run)"], "primary")
    local = Node("local", ["fast tier: checkpoint.local_dir", first(fields["local_dir"].description),
                           "every checkpoint.local_interval steps"], "box")
    durable = Node("durable", ["durable tier: checkpoint.dir", first(fields["dir"].description),
                               "every checkpoint.interval steps, COMPLETE marker"], "box")
    resume = Node("resume", ["restart: ranks fork warm, verify, then load the newest checkpoint",
                             "a local one only where every rank has it; else the durable one"], "accent")
    crash = Node("crash", ["a rank crashes or hangs", "torchrun restarts the pod's ranks"])
    stop = Node("stop", ["SIGTERM / SIGINT: save the step reached", f"exit 128 + signal "
                         f"({failures.stopped_exit(15)} for SIGTERM): retried"])
    permanent = Node("permanent", ["permanent: " + ", ".join(f"exit {code} {reason}" for code, reason in
                                                            failures.REASONS.items()),
                                   "the job fails at once"], "box")
    rows = [[step], [local, durable], [resume], [crash, stop, permanent]]
    edges = [("step", "local", "each rank alone"), ("step", "durable", "all ranks together"),
             ("local", "resume", ""), ("durable", "resume", ""), ("crash", "resume", ""), ("stop", "resume", "")]
    return render(Diagram(rows, edges), "Checkpoint tiers and recovery")
