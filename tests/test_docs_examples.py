"""Every Python and shell example of the manual (docs/**/*.md, and the README's Python) runs: a page's Python blocks
run in order in one namespace, and a fleet they define (`app`) is synthesized and validated as `kubetrain synth`
would; its shell blocks run in a copy of the project, where `kubetrain synth` rewrites that copy's dist/.

A block that cannot run here says why on the line before it: `<!-- no-run: REASON -->` (a sketch of a module
that does not exist, a fragment of a larger definition, output). The README's Quickstart commands are .ci/run's
own, so they are not run twice.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

FENCE = re.compile(r"(?:^ *<!-- no-run: (?P<reason>[^>]*?) -->\n)?^(?P<indent> *)```(?P<lang>\w+)\n(?P<body>.*?)^(?P=indent)```$",
                   re.MULTILINE | re.DOTALL)
RUNNABLE = {"python": "python", "bash": "shell", "sh": "shell", "shell": "shell"}


def blocks(page: Path) -> list[tuple[str, str, str | None, int]]:
    """(language, code, no-run reason, line) of each fenced block in `page`."""
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        lang = RUNNABLE.get(match.group("lang"))
        if lang is None:
            continue
        indent = len(match.group("indent"))
        body = "".join(line[indent:] for line in match.group("body").splitlines(keepends=True))
        found.append((lang, body, match.group("reason"), text[:match.start()].count("\n") + 1))
    return found


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def test_every_skipped_block_says_why():
    for page in pages():
        for lang, _, reason, line in blocks(page):
            assert reason is None or reason.strip(), f"{_id(page)}:{line}: a no-run block needs a reason"


def _python_pages() -> list[Path]:
    return [page for page in pages() if any(lang == "python" and reason is None
                                            for lang, _, reason, _ in blocks(page))]


@pytest.mark.parametrize("page", _python_pages(), ids=_id)
def test_the_python_examples_of_a_page_run_and_synthesize(page, tmp_path, monkeypatch):
    from kubetrain import App
    from kubetrain.pipeline import synth

    monkeypatch.chdir(ROOT)
    namespace: dict = {"__name__": f"docs_example_{page.stem}"}
    for lang, code, reason, line in blocks(page):
        if lang == "python" and reason is None:
            exec(compile(code, f"{_id(page)}:{line}", "exec"), namespace)  # noqa: S102 (the page's own example)
    if isinstance(namespace.get("app"), App):
        synth(namespace["app"], tmp_path / "dist")  # raises with every problem, as `kubetrain synth` reports them
        assert any((tmp_path / "dist").rglob("*.yaml"))


def _shell_pages() -> list[Path]:
    return [page for page in pages() if page.name != "README.md"
            and any(lang == "shell" and reason is None for lang, _, reason, _ in blocks(page))]


@pytest.mark.processes
@pytest.mark.parametrize("page", _shell_pages(), ids=_id)
def test_the_shell_examples_of_a_page_run_in_a_copy_of_the_project(page, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    for name in ("apps", "examples", "dist", "training", "kubetrain_runtime", "pyproject.toml", "cdk8s.yaml"):
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, project / name)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("CDK8S_OUTDIR", None)
    for lang, code, reason, line in blocks(page):
        if lang != "shell" or reason is not None:
            continue
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=project, env=env, capture_output=True,
                                text=True, timeout=540)
        assert result.returncode == 0, f"{_id(page)}:{line} failed:\n{code}\n{result.stdout[-3000:]}\n" \
                                       f"{result.stderr[-3000:]}"
