"""`kubetrain diff`: what a change to dist/ means, object by object and for training.

Compares dist/ at a git revision with the working tree. Objects are matched by (cluster folder, API group,
kind, namespace, name); an object removed and another added with the same cluster, kind, namespace and
`kubetrain.dev/job` label are one job's run replaced (create-once run names put a new name on every
changed definition), shown as one change with its field paths. Field paths match list items by their
`name` where they have one (containers, env, volumes), and look inside embedded YAML (a run config in a
ConfigMap). On top, the training meaning per job: world size, GPUs, global batch, image, queue; and every job
whose admission verdict (`kubetrain plan`: fits, borrows, never) differs between the two revisions.

Git is only read (`git rev-parse`, `git ls-tree`, `git cat-file --batch`); nothing is written.
"""

from __future__ import annotations

import difflib
import json
import subprocess
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubetrain.admission.plan_command import PlanInputError, verdict_changes
from kubetrain.cost.annotations import CostInputError
from kubetrain.cost.change import CostChange, markdown_lines, price_change, text_lines
from kubetrain.kinds.base import CHECKPOINT_DIR_ANNOTATION, RunShape
from kubetrain.kinds.kind_registry import group_kind, run_kind, shape_of
from kubetrain.model.manifests import UnreadableManifest, read_manifest, yaml_files
from kubetrain.model.vocabulary import GPU_RESOURCE, JOB_LABEL
from kubetrain.schedule import wait_change as waits
from kubetrain.schedule.simulate_command import SimulateInputError, SimulationInputs
from kubetrain_runtime.spelling import did_you_mean

COMMENT_MARKER = "<!-- kubetrain-diff -->"
_GITHUB_COMMENT_LIMIT = 60_000  # GitHub refuses comments over 65,536 characters
_MISSING = object()
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser where it exists


class DiffInputError(Exception):
    """Bad input (not a git repository, unknown revision, unreadable manifest): one line for the user."""


@dataclass(frozen=True, order=True)
class Key:
    cluster: str
    group: str
    kind: str
    namespace: str
    name: str

    def label(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.cluster}: {self.kind} {where}{self.name}"


@dataclass(frozen=True)
class FieldChange:
    path: str
    old: Any
    new: Any


@dataclass
class ObjectChange:
    change: str  # added | removed | changed | replaced
    key: Key  # the new object's key (the old one's for removals)
    old_key: Key | None = None  # set when replaced under another name
    fields: list[FieldChange] = field(default_factory=list)


@dataclass
class Report:
    base: str
    changes: list[ObjectChange]
    training: list[str]
    admission: list[str] = field(default_factory=list)  # jobs whose admission verdict changed
    runs: list[str] = field(default_factory=list)  # what the change does to running runs (replaced, or unsyncable)
    cost: CostChange = field(default_factory=CostChange)  # what the changed runs cost (kubetrain.cost.change)
    waits: waits.WaitChange = field(default_factory=waits.WaitChange)  # others' waits (kubetrain.schedule)

    def count(self, change: str) -> int:
        return sum(1 for c in self.changes if c.change == change)


# -- reading both sides -------------------------------------------------------------------------------

def _git(repo: Path, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True, check=False)


def repository_root(where: Path) -> Path:
    found = _git(where if where.is_dir() else where.parent, "rev-parse", "--show-toplevel")
    if found.returncode != 0:
        raise DiffInputError(f"{where.resolve()} is not inside a git repository: kubetrain diff compares dist/ "
                             "with a git revision; fix: run it in the repository that holds dist/, or give --dist "
                             "the dist/ folder of one (a new project: `git init`, then commit dist/)")
    return Path(found.stdout.decode().strip())


def read_revision(repo: Path, ref: str, prefix: str) -> dict[str, bytes]:
    """Every file under `prefix` (repository-relative) at `ref`, by path relative to `prefix`."""
    commit = _git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    if commit.returncode != 0:
        if _git(repo, "rev-parse", "--verify", "--quiet", "HEAD").returncode != 0 and \
                not _git(repo, "rev-list", "-n", "1", "--all").stdout.strip():
            raise DiffInputError(f"the repository at {repo} has no commits yet, so there is no revision {ref!r} to "
                                 "compare with; fix: commit dist/ first (`git add dist && git commit`), then "
                                 "`kubetrain diff` shows what changed since")
        refs = _git(repo, "for-each-ref", "--format=%(refname:short)").stdout.decode().split()
        raise DiffInputError(f"unknown revision {ref!r}; fix: {did_you_mean(ref, refs)}give --base a branch, tag or "
                             "commit of this repository (`git branch -a` lists the branches)")
    sha = commit.stdout.decode().strip()
    listing = _git(repo, "ls-tree", "-r", "-z", "--full-tree", sha, "--", prefix)
    if listing.returncode != 0:
        raise DiffInputError(f"cannot list {prefix}/ at {ref}: {' '.join(listing.stderr.decode().split())}; fix: "
                             "give --base a revision of this repository that git can read")
    blobs: list[tuple[str, str]] = []
    for entry in filter(None, listing.stdout.decode().split("\0")):
        meta, path = entry.split("\t", 1)
        if meta.split()[1] == "blob" and path.endswith((".yaml", ".yml")):
            blobs.append((meta.split()[2], path))
    if not blobs:
        return {}
    batch = _git(repo, "cat-file", "--batch", stdin="".join(f"{blob}\n" for blob, _ in blobs).encode())
    data, files, offset = batch.stdout, {}, 0
    for _, path in blobs:  # each answer: "<sha> blob <size>\n<content>\n"
        header_end = data.index(b"\n", offset)
        size = int(data[offset:header_end].split()[2])
        files[path[len(prefix) + 1:]] = data[header_end + 1:header_end + 1 + size]
        offset = header_end + 1 + size + 1
    return files


def load_objects(files: dict[str, bytes], folder: str, fix: str | None = None) -> dict[Key, dict[str, Any]]:
    """The objects of `files` (paths relative to `folder`, which messages name: `dist`, or `HEAD:dist`)."""
    objects: dict[Key, dict[str, Any]] = {}
    for path, data in sorted(files.items()):
        try:
            documents = read_manifest(f"{folder}/{path}", data)
        except UnreadableManifest as exc:
            raise DiffInputError(str(UnreadableManifest(exc.file, exc.line, exc.reason, fix or exc.fix))) from None
        for doc in documents:
            if isinstance(doc.get("metadata"), dict):
                group, kind = group_kind(doc)
                meta = doc["metadata"]
                key = Key(Path(path).parts[0], group, kind, str(meta.get("namespace") or ""), str(meta.get("name")))
                objects[key] = doc
    return objects


# -- comparing ----------------------------------------------------------------------------------------

def _segment(key: str) -> str:
    return f".{key}" if key.replace("_", "a").replace("-", "a").isalnum() else f"[{json.dumps(key)}]"


def _embedded(value: Any) -> Any:
    """A multi-line string holding a YAML mapping (an embedded config) as that mapping, else None."""
    if isinstance(value, str) and "\n" in value:
        try:
            parsed = yaml.load(value, Loader=_LOADER)
        except yaml.YAMLError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


def _by_name(items: list[Any]) -> dict[str, Any] | None:
    if all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items):
        named = {i["name"]: i for i in items}
        return named if len(named) == len(items) else None
    return None


def field_changes(old: Any, new: Any, path: str = "") -> Iterator[FieldChange]:
    """The leaf paths where `old` and `new` differ, with both values (`None` where one side lacks it)."""
    if old == new:
        return
    if isinstance(old, dict) and isinstance(new, dict):
        for key in [*old, *(k for k in new if k not in old)]:
            yield from field_changes(old.get(key, _MISSING), new.get(key, _MISSING), path + _segment(str(key)))
        return
    if isinstance(old, list) and isinstance(new, list):
        old_named, new_named = _by_name(old), _by_name(new)
        if old_named is not None and new_named is not None and (old or new):
            for name in [*old_named, *(n for n in new_named if n not in old_named)]:
                yield from field_changes(old_named.get(name, _MISSING), new_named.get(name, _MISSING),
                                         f"{path}[{name}]")
            return
        if len(old) == len(new):
            for i, (a, b) in enumerate(zip(old, new)):
                yield from field_changes(a, b, f"{path}[{i}]")
            return
    old_doc, new_doc = _embedded(old), _embedded(new)
    if old_doc is not None and new_doc is not None:
        yield from field_changes(old_doc, new_doc, path)
        return
    yield FieldChange(path.lstrip("."), None if old is _MISSING else old, None if new is _MISSING else new)


def _job_label(obj: dict[str, Any]) -> str | None:
    return ((obj.get("metadata") or {}).get("labels") or {}).get(JOB_LABEL)


def _run_slot(key: Key, obj: dict[str, Any]) -> tuple[str, str, str, str, str] | None:
    """What stays when a job's object is renamed: its cluster, kind, namespace and job label."""
    job = _job_label(obj)
    return (key.cluster, key.group, key.kind, key.namespace, job) if job else None


def compare(old: dict[Key, dict[str, Any]], new: dict[Key, dict[str, Any]], base: str) -> Report:
    changes: list[ObjectChange] = []
    for key in sorted(old.keys() & new.keys()):
        fields = list(field_changes(old[key], new[key]))
        if fields:
            changes.append(ObjectChange("changed", key, fields=fields))
    removed = sorted(old.keys() - new.keys())
    added = sorted(new.keys() - old.keys())
    # A run replaced under a new name: exactly one removed and one added object of the same job and kind.
    gone: dict[Any, list[Key]] = {}
    for key in removed:
        gone.setdefault(_run_slot(key, old[key]), []).append(key)
    came: dict[Any, list[Key]] = {}
    for key in added:
        came.setdefault(_run_slot(key, new[key]), []).append(key)
    for run, keys in came.items():
        if run is not None and len(keys) == 1 and len(gone.get(run, [])) == 1:
            old_key, new_key = gone[run][0], keys[0]
            changes.append(ObjectChange("replaced", new_key, old_key, list(field_changes(old[old_key], new[new_key]))))
            removed.remove(old_key)
            added.remove(new_key)
    changes += [ObjectChange("added", key) for key in added]
    changes += [ObjectChange("removed", key) for key in removed]
    changes.sort(key=lambda c: (c.key, c.change))
    touched = {c.key for c in changes} | {c.old_key for c in changes if c.old_key}
    return Report(base, changes, training_impact(old, new, touched), runs=run_impact(old, new, changes))


# -- running runs -------------------------------------------------------------------------------------

def _checkpoint_dir(key: Key, obj: dict[str, Any], side: dict[Key, dict[str, Any]]) -> tuple[str | None, bool]:
    """Where a run saves and resumes from, and whether kubetrain's trainer does the resuming: the run object's
    annotation, else (an older dist/) the run config of the trainer's ConfigMap beside it."""
    configs = [doc for k, doc in side.items() if k.kind == "ConfigMap" and k.cluster == key.cluster and
               k.namespace == key.namespace and _job_label(doc) == _job_label(obj)]
    runs = [run for doc in configs for value in (doc.get("data") or {}).values()
            if isinstance(run := _embedded(value), dict) and "max_steps" in run]
    trainer = bool(runs)
    annotated = ((obj.get("metadata") or {}).get("annotations") or {}).get(CHECKPOINT_DIR_ANNOTATION)
    if annotated:
        return str(annotated), trainer
    found = ((runs[0].get("checkpoint") or {}).get("dir") or "/checkpoints") if runs else None
    return found, trainer


def run_impact(old: dict[Key, dict[str, Any]], new: dict[Key, dict[str, Any]],
               changes: list[ObjectChange]) -> list[str]:
    """What the change does to runs that may be running: a replaced run's pods stop (Argo CD prunes the old object)
    and where the new run resumes from; a run object changed under its own name cannot be synced at all while it
    exists (its spec is immutable)."""
    lines = []
    for change in changes:
        if change.change == "replaced" and change.old_key and run_kind(new[change.key]) is not None:
            job = f"{change.key.cluster}/{change.key.namespace}/{_job_label(new[change.key])}"
            old_dir, _ = _checkpoint_dir(change.old_key, old[change.old_key], old)
            new_dir, trainer = _checkpoint_dir(change.key, new[change.key], new)
            line = (f"{job}: replaces run {change.old_key.name} with {change.key.name}: if {change.old_key.name} is "
                    "running, Argo CD prunes it and its pods stop (work since its last checkpoint is lost); ")
            if new_dir is None:
                line += f"{change.key.name} starts from step 0: no checkpoint folder is known"
            elif old_dir is not None and old_dir != new_dir:
                line += (f"{change.key.name} starts from step 0: it checkpoints to {new_dir}, not the old run's "
                         f"{old_dir}")
            elif trainer:
                line += f"{change.key.name} resumes from the newest verified checkpoint in {new_dir}"
            else:
                line += (f"{change.key.name} resumes from {new_dir} if the program loads its newest checkpoint "
                         "there")
            lines.append(line)
        elif change.change == "changed" and run_kind(new[change.key]) is not None and \
                any(f.path.startswith("spec") for f in change.fields):
            job = f"{change.key.cluster}/{change.key.namespace}/{_job_label(new[change.key]) or change.key.name}"
            lines.append(f"{job}: run {change.key.name} changes under its own name: while it exists Argo CD cannot "
                         "sync it (its spec is immutable, \"field is immutable\"); delete the run first, or name runs "
                         "by content (Cluster(run_names=\"content-hash\")) so a change is a new run")
    return lines


# -- the training meaning -----------------------------------------------------------------------------

def _run_facts(shape: RunShape) -> dict[str, str]:
    """World size, GPUs, image and queue of one run, as far as its kind says."""
    facts = {"pods": str(shape.pods)}
    if shape.elastic:
        facts["nodes"] = f"{shape.elastic[0]}-{shape.elastic[1]} (elastic)"
    if shape.procs_per_pod:
        facts["world size"] = str(shape.pods * shape.procs_per_pod)
    facts["GPUs"] = str(shape.accelerators if shape.accelerator_resource == GPU_RESOURCE else 0)
    if shape.images:
        facts["image"] = ", ".join(shape.images)
    if shape.queue:
        facts["queue"] = shape.queue
    return facts


def _config_facts(obj: dict[str, Any]) -> dict[str, str]:
    """Batch sizes from a job's run config (a ConfigMap with a run.yaml)."""
    facts = {}
    for value in (obj.get("data") or {}).values():
        run = _embedded(value)
        batch = (run or {}).get("batch")
        if isinstance(batch, dict):
            facts.update({"global batch": str(batch.get("global_size")), "micro batch": str(batch.get("micro_size"))})
    return facts


def _job_of(key: Key, obj: dict[str, Any]) -> tuple[str, str, str] | None:
    job = _job_label(obj)
    return (key.cluster, key.namespace, job) if job else None


def _jobs(objects: dict[Key, dict[str, Any]], wanted: set[tuple[str, str, str]]) -> dict[tuple[str, str, str],
                                                                                         dict[str, str]]:
    """(cluster, namespace, job) -> its training facts, from its run object and its ConfigMap; only for the
    `wanted` jobs (reading every run config of a large fleet would cost seconds for nothing)."""
    jobs: dict[tuple[str, str, str], dict[str, str]] = {}
    by_name = {(key.cluster, key.kind, key.namespace, key.name): obj for key, obj in objects.items()}
    for key, obj in objects.items():
        job = _job_label(obj)
        if not job or (key.cluster, key.namespace, job) not in wanted:
            continue
        if run_kind(obj) is not None:
            def sibling(kind: str, name: str, key: Key = key) -> dict[str, Any] | None:
                return by_name.get((key.cluster, kind, key.namespace, name)) or by_name.get((key.cluster, kind, "", name))

            jobs.setdefault((key.cluster, key.namespace, job), {}).update(_run_facts(shape_of(obj, sibling)))
        elif key.kind == "ConfigMap":
            jobs.setdefault((key.cluster, key.namespace, job), {}).update(_config_facts(obj))
    return jobs


FACT_ORDER = ("world size", "pods", "nodes", "GPUs", "global batch", "micro batch", "image", "queue")


def training_impact(old: dict[Key, dict[str, Any]], new: dict[Key, dict[str, Any]], touched: set[Key]) -> list[str]:
    """One line per job that a change touches: what it means for training."""
    wanted = {job for key in touched for side in (old, new) if key in side and (job := _job_of(key, side[key]))}
    before, after = _jobs(old, wanted), _jobs(new, wanted)
    lines = []
    for job in sorted(before.keys() | after.keys()):
        name = "/".join(job)
        if job not in before:
            facts = after[job]
            lines.append(f"{name}: new job, " + ", ".join(f"{k} {facts[k]}" for k in FACT_ORDER if k in facts))
        elif job not in after:
            lines.append(f"{name}: job removed")
        else:
            moved = [f"{k} {before[job].get(k, '-')} -> {after[job].get(k, '-')}" for k in FACT_ORDER
                     if before[job].get(k) != after[job].get(k)]
            if moved:
                lines.append(f"{name}: " + ", ".join(moved))
    return lines


# -- output -------------------------------------------------------------------------------------------

def _value(value: Any, width: int = 80) -> str:
    if value is None:
        return "(none)"
    if value == "":
        return "(empty)"
    if isinstance(value, str) and "\n" in value:
        return f"({value.count(chr(10)) + 1} lines of text)"
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), sort_keys=True)
    return text if len(text) <= width else text[:width - 3] + "..."


def _text_diff(old: Any, new: Any) -> list[str]:
    """The changed lines of a text field that has lines (a function's source, a script), as a unified diff with a
    line of context: what a reviewer reads, where the field line only says how long the texts are."""
    if not (isinstance(old, str) and isinstance(new, str) and ("\n" in old or "\n" in new)):
        return []
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), n=1, lineterm="")
    return [line for line in lines if not line.startswith(("---", "+++"))]


_FENCE = "`" * 3  # a Markdown code block's fence

_VERB = {"added": "+ added", "removed": "- removed", "changed": "~ changed", "replaced": "~ replaced"}


def _title(change: ObjectChange) -> str:
    if change.change == "replaced" and change.old_key:
        return f"{change.key.label()} (was {change.old_key.name})"
    return change.key.label()


def _summary(report: Report) -> str:
    counts = [f"{report.count(c)} {c}" for c in ("changed", "replaced", "added", "removed")]
    return ", ".join(counts)


def render_text(report: Report) -> str:
    if not report.changes:
        return f"kubetrain diff {report.base}..working tree: no changes\n"
    lines = [f"kubetrain diff {report.base}..working tree: {_summary(report)}", *text_lines(report.cost)]
    if report.training:
        lines += ["training:", *(f"  {line}" for line in report.training)]
    if report.admission:
        lines += ["admission:", *(f"  {line}" for line in report.admission)]
    if report.runs:
        lines += ["running runs:", *(f"  {line}" for line in report.runs)]
    lines += waits.text_lines(report.waits)
    for change in report.changes:
        lines.append(f"{_VERB[change.change]} {_title(change)}")
        for f in change.fields:
            lines.append(f"    {f.path}: {_value(f.old)} -> {_value(f.new)}")
            lines += [f"        {line}" for line in _text_diff(f.old, f.new)]
    return "\n".join(lines) + "\n"


def _code(text: str) -> str:
    """Text as a Markdown code span: shown as is (no HTML, no entities); a backtick would end it."""
    return "`" + text.replace("`", "'") + "`"


def _cell(text: str) -> str:
    """A code span inside a table cell, where a pipe would end the cell (GitHub reads `\\|` there)."""
    return _code(text).replace("|", "\\|")


def render_markdown(report: Report, details: bool = True) -> str:
    lines = [COMMENT_MARKER, f"### kubetrain diff: `{report.base}` → this change", ""]
    if not report.changes:
        return "\n".join([*lines, "No changes to the manifests.", ""])
    lines += [f"**{_summary(report)}** objects.", "", *markdown_lines(report.cost)]
    if report.training:
        lines += ["#### Training impact", "", *(f"- {_code(line)}" for line in report.training), ""]
    if report.admission:
        lines += ["#### Admission (`kubetrain plan`)", "", *(f"- {_code(line)}" for line in report.admission), ""]
    if report.runs:
        lines += ["#### Running runs", "", *(f"- {_code(line)}" for line in report.runs), ""]
    lines += waits.markdown_lines(report.waits)
    lines += ["#### Objects", "", "| change | cluster | object | fields |", "|---|---|---|---|"]
    for change in report.changes:
        where = f"{change.key.namespace}/" if change.key.namespace else ""
        name = f"{change.key.kind} {where}{change.key.name}"
        if change.change == "replaced" and change.old_key:
            name += f" (was {change.old_key.name})"
        lines.append(f"| {change.change} | {change.key.cluster} | {_cell(name)} | {len(change.fields) or ''} |")
    changed = [c for c in report.changes if c.fields]
    if details and changed:
        lines += ["", "<details><summary>Field changes</summary>", ""]
        for change in changed:
            lines += [f"**{_code(_title(change))}**", "", "| field | old | new |", "|---|---|---|"]
            lines += [f"| {_cell(f.path)} | {_cell(_value(f.old))} | {_cell(_value(f.new))} |" for f in change.fields]
            lines.append("")
            for f in change.fields:
                if text := _text_diff(f.old, f.new):  # a fence inside the block would end it
                    lines += [_code(f.path), "", _FENCE + "diff", *(line.replace(_FENCE, "'''") for line in text),
                              _FENCE, ""]
        lines.append("</details>")
    text = "\n".join(lines) + "\n"
    if len(text) > _GITHUB_COMMENT_LIMIT and details:
        return render_markdown(report, details=False) + "\n_Field changes left out: too long for a comment; run " \
                                                         "`kubetrain diff` locally._\n"
    return text


def diff(dist: Path, base: str = "HEAD", schedule: SimulationInputs | None = None) -> Report:
    """Compare `dist` at revision `base` with the working tree. Raises DiffInputError on bad input. `schedule`:
    what the waits' simulation takes besides dist/ (background load)."""
    repo = repository_root(dist if dist.exists() else dist.parent if dist.parent.exists() else Path.cwd())
    try:
        prefix = dist.resolve().relative_to(repo.resolve()).as_posix()
    except ValueError:
        raise DiffInputError(f"{dist} is outside the git repository at {repo}; fix: give --dist a folder inside "
                             "the repository, or run kubetrain diff in the repository that holds it") from None
    if prefix == ".":
        raise DiffInputError(f"{dist} is the repository root; fix: give --dist the folder synth writes (dist)")
    old_files, new_files = read_revision(repo, base, prefix), yaml_files(dist)
    if not old_files and not dist.is_dir():  # a typo, not a fleet that was removed: there is nothing on either side
        raise DiffInputError(f"{dist} is not a folder here nor at {base}; fix: give --dist the folder synth writes "
                             "(dist)")
    # A file with the same bytes on both sides holds the same objects: only the others are parsed, which
    # keeps a one-job change in a fleet of thousands of objects quick.
    same = {path for path in old_files.keys() & new_files.keys() if old_files[path] == new_files[path]}
    # A file of the base revision that cannot be read is history: the fix is another base, not an edit.
    old_side = (f"{base}:{prefix}", f"give --base a revision whose {prefix}/ `kubetrain synth` wrote")
    old = load_objects({p: data for p, data in old_files.items() if p not in same}, *old_side)
    new = load_objects({p: data for p, data in new_files.items() if p not in same}, str(dist))
    report = compare(old, new, base)
    try:
        report.cost = price_change(_by_cluster(old), _by_cluster(new), _loader(old_files, *old_side),
                                   _loader(new_files, str(dist)))
    except CostInputError as error:
        raise DiffInputError(str(error)) from None
    report.admission = admission_changes(old_files, new_files, old_side[0], str(dist))
    try:
        report.waits = waits.wait_change(old_files, new_files, old_side[0], str(dist), schedule)
    except SimulateInputError as error:  # a load file's problems, one line for the one error diff reports
        raise DiffInputError("; ".join(str(error).splitlines())) from None
    return report


def _by_cluster(objects: dict[Key, dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(key.cluster, obj) for key, obj in objects.items()]


def _loader(files: dict[str, bytes], folder: str,
            fix: str | None = None) -> Callable[[Iterable[str]], list[tuple[str, dict[str, Any]]]]:
    """Reads further files of one side on demand (the cost of a changed run reads its ConfigMap and pool)."""
    return lambda paths: _by_cluster(load_objects({p: files[p] for p in paths if p in files}, folder, fix))


def admission_changes(old_files: dict[str, bytes], new_files: dict[str, bytes], old_folder: str = "base",
                      new_folder: str = "dist") -> list[str]:
    """Jobs whose `kubetrain plan` verdict differs between the two revisions."""
    try:
        return verdict_changes(old_files, new_files, old_folder, new_folder)
    except PlanInputError as error:
        raise DiffInputError(str(error)) from None
