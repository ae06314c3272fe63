"""Every Python and shell example of the manual (docs/**/*.md, and the README's Python) runs, as it is shown:

- A page's Python blocks run in order in one namespace, collapsed set-up blocks (`??? example`) included, so a
  block may build on the one before. A fleet they define (`app`) is synthesized and validated as `kubetrain synth`
  would. A page whose examples use the runtime (`torch`, `kubetrain_runtime`) runs them in a Python process of its
  own in an empty folder: a `Run` owns its process (signals, exit codes) and writes its checkpoints there.
- A block that shows code of the project (`--8<-- "FILE:SECTION"`, pymdownx.snippets) is that code: the section
  exists, is whole Python, and lives in apps/ (the example fleet, synthesized by getting-started's example) or the
  compiler (imported by every test).
- A page's shell blocks run in one bash process, in a copy of the project shared by the pages, where
  `kubetrain synth` rewrites that copy's dist/. The README's Quickstart commands are .ci/run's own, so they are not
  run twice.
- A YAML block is a file some command reads, validated as that command validates it (YAML_FILES).
- A `kubetrain ...` command quoted in the prose names a command of the CLI and options that command has.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>\w+)\n(?P<body>.*?)^(?P=indent)```$", re.MULTILINE | re.DOTALL)
LANGUAGES = {"python": "python", "bash": "shell", "sh": "shell", "shell": "shell", "yaml": "yaml"}
SNIPPET = re.compile(r'^--8<-- "(?P<file>[^":]+):(?P<section>[\w-]+)"$')
RUNTIME = re.compile(r"^\s*(?:import|from) (?:torch|kubetrain_runtime)\b", re.MULTILINE)


def blocks(page: Path) -> list[tuple[str, str, int]]:
    """(language, code, line) of each fenced Python, shell or YAML block in `page`, dedented."""
    text = page.read_text()
    found = []
    for match in FENCE.finditer(text):
        lang = LANGUAGES.get(match.group("lang"))
        if lang is None:
            continue
        indent = len(match.group("indent"))
        body = "".join(line[indent:] for line in match.group("body").splitlines(keepends=True))
        found.append((lang, body, text[:match.start()].count("\n") + 1))
    return found


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _snippets(code: str) -> list[re.Match[str]] | None:
    """The includes of a block made only of `--8<--` lines; None for a block of its own code."""
    lines = [line for line in code.splitlines() if line.strip() and not line.startswith("#")]
    matches = [SNIPPET.match(line) for line in lines]
    return matches if lines and all(matches) else None


def _python(page: Path) -> list[tuple[str, int]]:
    return [(code, line) for lang, code, line in blocks(page) if lang == "python" and _snippets(code) is None]


def test_no_example_is_left_out():
    """Nothing marks a block as not to be run any more: a fragment gets its context (a collapsed set-up block) or
    shows the project's own code."""
    for page in pages():
        assert "no-run:" not in page.read_text(), f"{_id(page)}: every example runs"


@pytest.mark.parametrize("page", [page for page in pages() if _python(page)
                                  and not any(RUNTIME.search(code) for code, _ in _python(page))], ids=_id)
def test_the_python_examples_of_a_page_run_and_synthesize(page, tmp_path, monkeypatch):
    from kubetrain import App
    from kubetrain.pipeline import synth

    monkeypatch.chdir(ROOT)
    namespace: dict = {"__name__": f"docs_example_{page.stem}"}
    for code, line in _python(page):
        exec(compile(code, f"{_id(page)}:{line}", "exec"), namespace)  # noqa: S102 (the page's own example)
    if isinstance(namespace.get("app"), App):
        synth(namespace["app"], tmp_path / "dist")  # raises with every problem, as `kubetrain synth` reports them
        assert any((tmp_path / "dist").rglob("*.yaml"))


@pytest.mark.processes
@pytest.mark.parametrize("page", [page for page in pages()
                                  if any(RUNTIME.search(code) for code, _ in _python(page))], ids=_id)
def test_the_runtime_examples_of_a_page_run_on_the_cpu(page, tmp_path):
    # One script of the page's blocks, each compiled under its own page and line, so a traceback points at the page.
    script = "".join(f"exec(compile({code!r}, {f'{_id(page)}:{line}'!r}, 'exec'))\n" for code, line in _python(page))
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "constructs")])})
    assert result.returncode == 0, f"{_id(page)}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"


@pytest.mark.parametrize("page", [page for page in pages()
                                  if any(lang == "python" and _snippets(code) for lang, code, _ in blocks(page))],
                         ids=_id)
def test_a_block_that_shows_the_projects_code_shows_whole_code_the_suite_runs(page):
    for lang, code, line in blocks(page):
        for match in (_snippets(code) or []) if lang == "python" else []:
            where, source = f"{_id(page)}:{line}", ROOT / match.group("file")
            assert source.parts[len(ROOT.parts)] in ("apps", "constructs"), f"{where}: {source} is not run by tests"
            text = source.read_text()
            start, end = (f"--8<-- [{edge}:{match.group('section')}]" for edge in ("start", "end"))
            assert start in text and end in text, f"{where}: {source} has no section {match.group('section')}"
            section = text[text.index("\n", text.index(start)) + 1:text.index(end)]
            section = section[:section.rindex("\n") + 1]  # up to the end marker's own line
            assert section.strip(), f"{where}: the section is empty"
            compile(textwrap.dedent(section), where, "exec")  # whole statements, not a fragment of one


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A copy of the project, shared by the pages' shell examples (each writes only its own .run-local/ folder,
    and `kubetrain synth` writes the dist/ it was copied from)."""
    project = tmp_path_factory.mktemp("project")
    for name in ("apps", "examples", "dist", "training", "kubetrain_runtime", "pyproject.toml", "cdk8s.yaml"):
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, project / name)
    return project


@pytest.mark.processes
@pytest.mark.parametrize("page", [page for page in pages() if page.name != "README.md"
                                  and any(lang == "shell" for lang, _, _ in blocks(page))], ids=_id)
def test_the_shell_examples_of_a_page_run_in_a_copy_of_the_project(page, project):
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("CDK8S_OUTDIR", None)
    # One bash for the page's blocks, each announced on stderr, so a failure names its block.
    script = "".join(f"echo {shlex.quote(f'== {_id(page)}:{line}')} >&2\n{code}"
                     for lang, code, line in blocks(page) if lang == "shell")
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=project, env=env, capture_output=True,
                            text=True, timeout=540)
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"


def _load_file(data: dict) -> None:
    from kubetrain.schedule.background import Load
    from kubetrain_runtime.problems import validate_model

    validate_model(Load, data, "load.yaml")  # ConfigError with every problem's field path


# The files the manual shows, by their top-level keys, and the check their command makes of them.
YAML_FILES = {frozenset({"classes"}): _load_file}


def test_every_yaml_block_is_a_file_a_command_accepts():
    shown = [(page, code, line) for page in pages() for lang, code, line in blocks(page) if lang == "yaml"]
    assert shown
    for page, code, line in shown:
        data = yaml.safe_load(code)
        check = YAML_FILES.get(frozenset(data)) if isinstance(data, dict) else None
        assert check, f"{_id(page)}:{line}: which command reads this YAML? Add its check to YAML_FILES"
        check(data)


INLINE_COMMAND = re.compile(r"`(kubetrain [a-z][^`]*)`")
# The manual's own examples of mistakes (docs/reference/cli.md, usage errors): each is refused, as it says.
MISTAKES = {"kubetrain synth --stirct": "did you mean --strict?",
            "kubetrain plan --steps 3": "--steps is an option of `kubetrain run-local`"}


def test_every_kubetrain_command_the_manual_quotes_exists_with_its_options():
    """`kubetrain plan --submit JOB=HOURS` in a sentence, or a command of a shell block: the command and each of
    its options are the CLI's (typer's app), so a renamed flag cannot linger in the manual."""
    import typer.main

    from kubetrain.cli import app, usage_problem

    cli = typer.main.get_command(app)
    quoted = [(page, command) for page in pages() for command in INLINE_COMMAND.findall(page.read_text())]
    quoted += [(page, line.strip()) for page in pages() for lang, code, _ in blocks(page) if lang == "shell"
               for line in code.replace("\\\n", " ").splitlines() if line.strip().startswith("kubetrain ")]
    assert len(quoted) > 20
    for page, command in quoted:
        if command in MISTAKES:
            with pytest.raises(Exception) as refused:  # click's usage error, which kubetrain's main() prints
                app(command.split()[1:], prog_name="kubetrain", standalone_mode=False)
            assert MISTAKES[command] in usage_problem(refused.value), command
            continue
        words = re.split(r"\s(?:\||&&|;|#)\s", f"{command} ")[0].split()  # the command, not what its output pipes to
        if len(words) < 2 or not re.fullmatch(r"[a-z][a-z-]*", words[1]):
            continue  # `kubetrain CODE`-like placeholders name no command
        sub = cli.commands.get(words[1])
        assert sub is not None, f"{_id(page)}: `{command}` names no command of the CLI"
        known = {opt for param in sub.params for opt in (*param.opts, *param.secondary_opts)}
        for word in words[2:]:
            if word.startswith("--"):
                option = word.split("=", 1)[0]
                assert option in known, f"{_id(page)}: `{command}`: {words[1]} has no option {option}"
