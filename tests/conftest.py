"""Shared fixtures: the project root, the upstream CRDs, and a way to run our commands."""

from __future__ import annotations

import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Generator
from pathlib import Path

import process_guard
import pytest

ROOT = Path(__file__).resolve().parents[1]
CRDS = ROOT.parent / "shared" / "crds"

# Every rule the tests make fire is recorded, here and in every process they start, xdist's workers included: the
# first conftest to run (the controller's under xdist) names the sink in the environment the workers inherit.
RULES_FIRED = Path(__file__).parent / "rules_fired"
sys.path.insert(0, str(RULES_FIRED))
import rules_recorder

# KUBETRAIN_RULES_FIRED set by hand keeps the record after the run (to see what fired where).
KEEP_RULES_SINK = bool(os.environ.get(rules_recorder.SINK))
RULES_SINK = Path(os.environ.get(rules_recorder.SINK) or Path(tempfile.mkdtemp(prefix="kubetrain-rules-fired-")) / "fired")
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(RULES_FIRED), os.environ.get("PYTHONPATH")]))
rules_recorder.install(RULES_SINK)
# torch on one thread in the workers and in every process they start (torchrun's own default for several ranks): two
# workers share the two cores, and a second thread in each process only takes turns with the other worker's, its
# OpenMP threads spinning while they wait. A test of the threads torchrun gives its ranks leaves the variable out.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# What a process the tests start imports the project from (and the recorder, which its sitecustomize installs).
SOURCES_PATH = os.pathsep.join([str(RULES_FIRED), str(ROOT / "constructs"), str(ROOT)])


# The modules that take longest, longest first (summed test time of a full run, 2026-11-28): xdist starts them
# first so that no long module starts last while the other worker has nothing left. Only the order depends on it:
# a module missing here runs after these, those that start the most processes first.
LONGEST_FIRST = ("test_resilience", "test_user_loop", "test_hf_training", "test_fault_drills", "test_training",
                 "test_gpu_bench", "test_runtime_metrics", "test_run_local", "test_bad_input", "test_memory",
                 "test_docs_site", "test_function_workload", "test_docs_examples", "test_usage_errors",
                 "test_gradient_accumulation", "test_progress", "test_hf_model_rules")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Whole modules in the order of LONGEST_FIRST, then the others that start processes (seconds to a minute each
    test), most such tests first, then the in-process ones (milliseconds); in a module, the tests that start
    processes first. xdist hands whole modules to its workers in this order (`--dist=loadscope`): a module's shared
    runs (its module-scoped fixtures) start once, and the workers end together instead of one finishing a long
    module while the other idles."""
    def module(item: pytest.Item) -> str:
        return item.nodeid.split("::", 1)[0]

    def rank(name: str) -> tuple[int, int]:
        stem = Path(name).stem
        return (LONGEST_FIRST.index(stem), 0) if stem in LONGEST_FIRST else (len(LONGEST_FIRST), -starting[name])

    starting = collections.Counter(module(item) for item in items if item.get_closest_marker("processes"))
    first: dict[str, int] = {}
    for index, item in enumerate(items):
        first.setdefault(module(item), index)
    items.sort(key=lambda item: (rank(module(item)), first[module(item)], item.get_closest_marker("processes") is None))


# Every process the tests start (some 1,600 a run) imports the project from its sources. Compiled once here, before
# the workers start, they load from __pycache__ even where PYTHONDONTWRITEBYTECODE keeps Python from writing it itself
# (CI's environment sets it): otherwise each process compiles what it imports, ~0.15 s of a rank's start.
COMPILED = ("constructs", "training", "kubetrain_runtime", "apps", "bench", "examples", "tests/rules_fired")


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist)
        import compileall

        for folder in COMPILED:
            compileall.compile_dir(ROOT / folder, quiet=2)


def _whole_suite(config: pytest.Config) -> bool:
    """Plain `pytest` (or `pytest tests`) running the tests: no selection by keyword, mark, file, deselection or
    last failures, and not `--collect-only`."""
    option = config.option
    args = {Path(arg).resolve() for arg in config.args}
    selected = option.keyword or option.markexpr or option.deselect or getattr(option, "lf", False)
    return not selected and not option.collectonly and args <= {ROOT / "tests", ROOT}


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Once every test (in every worker) has run: was every rule reached where it is checked (rules_reached.py)?"""
    if hasattr(session.config, "workerinput") or not _whole_suite(session.config) or not CRDS.is_dir():
        return
    if session.exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
        return  # interrupted or nothing collected: the record is partial
    from kubetrain.rules.catalog import every_rule
    from rules_reached import unreached

    rules = every_rule()
    problems = unreached(RULES_SINK, rules)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_sep("=", "rules reached", red=bool(problems), green=not problems)
        for line in problems or [f"every one of the {len(rules)} rules fired where it is checked"]:
            reporter.write_line(line)
    if problems:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


# A test that starts a process carries the `processes` mark (process_guard.py).
process_guard.install()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    return (yield from process_guard.GUARD.during(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    return (yield from process_guard.GUARD.during(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    return (yield from process_guard.GUARD.during(item))


def pytest_unconfigure(config: pytest.Config) -> None:
    if not KEEP_RULES_SINK:
        shutil.rmtree(RULES_SINK.parent, ignore_errors=True)


@pytest.fixture(scope="session")
def crds() -> Path:
    if not CRDS.is_dir():
        pytest.skip(f"upstream CRDs not found at {CRDS}: custom resources cannot be validated without them")
    return CRDS


def run(args: list[str], cwd: Path = ROOT, env: dict[str, str] | None = None,
        timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run a command with this interpreter's environment; the project's sources importable."""
    full_env = {**os.environ, "PYTHONPATH": SOURCES_PATH}
    full_env.pop("CDK8S_OUTDIR", None)
    full_env.update(env or {})
    return subprocess.run(args, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout)


def kubetrain(*args: str, cwd: Path = ROOT, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run([sys.executable, "-m", "kubetrain", *args], cwd=cwd, env=env)


def read_tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def dist_file(cluster: str, kind: str, job: str, suffix: str = "") -> Path:
    """A job's committed object: `<Kind>.<job><suffix>.yaml`, or `<Kind>.<job>-<hash><suffix>.yaml` for create-once
    runs (a run's ConfigMap: suffix `-config`)."""
    name = re.compile(rf"{re.escape(kind)}\.{re.escape(job)}(-[0-9a-f]{{8}})?{re.escape(suffix)}\.yaml")
    (path,) = [p for p in (ROOT / "dist" / cluster).glob(f"*/{kind}.{job}*.yaml") if name.fullmatch(p.name)]
    return path
