"""A Python function as the workload (`Function`): captured at synth into a ConfigMap, run under torchrun, refused
with its reason when the capture would not be faithful."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, kubetrain
from kubetrain import App, Cluster, Function, TrainingJob
from kubetrain.state import diagnostics

pytest.importorskip("torch", reason="run-local starts torchrun, which needs torch")

JOB = {"image": "img:1", "nodes": 2, "procs_per_node": 1, "resources": {"cpu": "1", "memory": "2Gi"}}

HELPERS = '''
import json
import numpy as np

SCALE = 2.0


def top_level(steps: int, lr: float = 0.1):
    import os
    print(json.dumps({"rank": os.environ["RANK"], "steps": steps}))


def reads_a_constant(steps: int):
    return SCALE * steps


def uses_numpy():
    return np.zeros(3)


def defaults_to_a_constant(scale=SCALE):
    return scale


def decorate(f):
    return f


@decorate
def decorated():
    pass


def make_closure(n):
    def closure():
        return n
    return closure


async def coroutine():
    pass
'''


@pytest.fixture(scope="module")
def helpers(tmp_path_factory):
    folder = tmp_path_factory.mktemp("helpers")
    (folder / "fn_helpers.py").write_text(HELPERS)
    sys.path.insert(0, str(folder))
    try:
        import fn_helpers
        yield fn_helpers
    finally:
        sys.path.remove(str(folder))


def problems(workload) -> list[tuple[str, str, str]]:
    app = App()
    TrainingJob(Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"]), "fn", {**JOB, "workload": workload})
    return [(f.problem.code, f.problem.path, f.problem.message) for f in diagnostics(app).findings]


def test_what_cannot_be_captured_faithfully_is_refused_with_its_reason(helpers):
    cases = [
        (Function(lambda: None), "workload.func", "a lambda"),
        (Function(helpers.make_closure(3)), "workload.func", "nested in another function"),
        (Function(helpers.reads_a_constant, kwargs={"steps": 1}), "workload.func", "reads 'SCALE', a module-level float"),
        (Function(helpers.uses_numpy), "workload.func", "uses module numpy"),
        (Function(helpers.defaults_to_a_constant), "workload.func", "a default value"),
        (Function(helpers.decorated), "workload.func", "is decorated"),
        (Function(helpers.coroutine), "workload.func", "is async"),
        (Function(helpers.top_level), "workload.kwargs", "missing a required argument: 'steps'"),
        (Function(helpers.top_level, kwargs={"step": 1}), "workload.kwargs", "has no parameter 'step'"),
        (Function(helpers.top_level, kwargs={"steps": (1, 2)}), "workload.kwargs", "tuple (1, 2) comes back as [1, 2]"),
        (Function(helpers.top_level, kwargs={"steps": 1, "lr": float("inf")}), "workload.kwargs", "not JSON"),
        (Function(helpers.top_level, kwargs={"steps": {1: 2}}), "workload.kwargs", "is not the same after JSON"),
        (Function(helpers.top_level, kwargs={"steps": 1}, packages=["torch>=2", "--extra-index-url x"]),
         "workload.packages", "packages.1 '--extra-index-url x' is not a pip requirement"),
        (Function(helpers.top_level, kwargs={"steps": 1}, packages=["Numpy", "numpy<3"]), "workload.packages",
         "names numpy again"),
    ]
    for workload, path, reason in cases:
        found = problems(workload)
        assert len(found) == 1 and found[0][:2] == ("KT157", path) and reason in found[0][2], (reason, found)
    # A function of __main__ (a script run directly, interactive input) cannot be read back.
    main = type(helpers.top_level)(helpers.top_level.__code__, {"__name__": "__main__"}, "top_level")
    main.__module__ = "__main__"
    assert "defined in __main__" in problems(Function(main, kwargs={"steps": 1}))[0][2]
    # A typo in the workload's own fields, with did-you-mean.
    found = problems(Function(helpers.top_level, kwarg={"steps": 1}))
    assert ("KT001", "workload.kwarg") in [f[:2] for f in found]
    # What the capture can honour: a module imported at module level that is listed in packages, and the stdlib.
    assert problems(Function(helpers.uses_numpy, packages=["numpy>=1.26"])) == []
    assert problems(Function(helpers.top_level, kwargs={"steps": 3})) == []


def test_the_dev_function_job_holds_the_guides_source_and_runs_under_run_local(tmp_path):
    # The committed ConfigMap: what the pull request shows.
    [path] = (ROOT / "dist" / "dev" / "ml-dev").glob("ConfigMap.fashion-mnist-*-config.yaml")
    config = yaml.safe_load(path.read_text())
    source = config["data"]["function.py"]
    assert "def train_fashion_mnist(" in source and "nn.parallel.DistributedDataParallel" in source
    assert source.rstrip().endswith("train_fashion_mnist(**kwargs)")
    assert yaml.safe_load(config["data"]["kwargs.json"]) == {"epochs": 3, "batch_size": 32, "synthetic": 512}
    result = kubetrain("run-local", "dev/fashion-mnist", "--workdir", str(tmp_path))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "Distributed Training with WORLD_SIZE: 2, RANK: 1" in result.stdout
    assert [line.split("] ", 1)[1] for line in result.stdout.splitlines() if "Train Epoch" in line][0].startswith(
        "Train Epoch: 0 [0/512 (0%)]")
    assert "Training is finished" in result.stdout


FLEET = '''
from kubetrain import App, Cluster, Function, TrainingJob
from fleet.work import {name}


def build():
    app = App()
    cluster = Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"])
    TrainingJob(cluster, "fn", image="img:1", nodes=2, procs_per_node=1, resources={{"cpu": "1", "memory": "2Gi"}},
                workload=Function({name}, kwargs={{"greeting": "{greeting}"}}, packages=["kubetrain-fixture-hello==1.0"]))
    return app
'''

WORK = '''
def greet(greeting: str):
    import os

    import kubetrain_fixture_hello
    print(kubetrain_fixture_hello.hello(greeting), "from rank", os.environ["RANK"])
'''


def wheel(folder: Path) -> Path:
    """A real wheel of a package no image has (pip installs it offline from this folder)."""
    files = {"kubetrain_fixture_hello/__init__.py": 'def hello(word):\n    return f"{word}, packaged"\n',
             "kubetrain_fixture_hello-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: kubetrain-fixture-hello\n"
                                                                "Version: 1.0\n",
             "kubetrain_fixture_hello-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: "
                                                            "true\nTag: py3-none-any\n"}
    record = [f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()}"
              f",{len(text.encode())}" for name, text in files.items()]
    files["kubetrain_fixture_hello-1.0.dist-info/RECORD"] = "\n".join(
        [*record, "kubetrain_fixture_hello-1.0.dist-info/RECORD,,"]) + "\n"
    path = folder / "kubetrain_fixture_hello-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return path


def test_packages_are_installed_at_pod_start_and_a_change_of_the_function_shows_in_diff(tmp_path):
    (tmp_path / "fleet").mkdir()
    (tmp_path / "fleet" / "work.py").write_text(textwrap.dedent(WORK))
    (tmp_path / "fleet" / "__init__.py").write_text(FLEET.format(name="greet", greeting="hello"))
    result = kubetrain("synth", "--app", "fleet", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    [config] = (tmp_path / "dist" / "c" / "ml").glob("ConfigMap.fn*-config.yaml")
    assert yaml.safe_load(config.read_text())["data"]["requirements.txt"] == "kubetrain-fixture-hello==1.0\n"
    (tmp_path / "wheels").mkdir()
    wheel(tmp_path / "wheels")
    offline = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path / "wheels")}
    result = kubetrain("run-local", "c/fn", "--workdir", str(tmp_path / "w"), "--dist", str(tmp_path / "dist"),
                       env=offline)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "hello, packaged from rank 1" in result.stdout and "hello, packaged from rank 0" in result.stdout
    # Installed into the pod's own emptyDir, not into this interpreter.
    assert list((tmp_path / "w" / "pods").glob("*/kubetrain-packages/**/kubetrain_fixture_hello/__init__.py"))
    assert "kubetrain_fixture_hello" not in sys.modules
    # A package pip cannot find fails the pod with pip's own message.
    result = kubetrain("run-local", "c/fn", "--workdir", str(tmp_path / "w2"), "--dist", str(tmp_path / "dist"),
                       env={**offline, "PIP_FIND_LINKS": str(tmp_path)})
    assert result.returncode != 0 and "installing the function's packages failed" in result.stdout

    # The pull request's diff shows the code that changed.
    (tmp_path / "fleet" / "work.py").write_text(textwrap.dedent(WORK).replace('"from rank"', '"on rank"'))
    git = ["git", "-C", str(tmp_path)]
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]):
        subprocess.run([*git, *args], check=True)
    assert kubetrain("synth", "--app", "fleet", cwd=tmp_path).returncode == 0
    diff = kubetrain("diff", cwd=tmp_path)
    assert diff.returncode == 0, diff.stderr
    assert '"on rank"' in diff.stdout and '"from rank"' in diff.stdout, diff.stdout
