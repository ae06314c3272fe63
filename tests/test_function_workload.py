"""A Python function as the workload (`Function`): captured at synth into a ConfigMap, run under torchrun, refused
with its reason when the capture would not be faithful."""

from __future__ import annotations

import base64
import functools
import hashlib
import http.server
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import zipfile
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, kubetrain
from kubetrain import App, Cluster, Function, PipIndexSecret, PyTorchJob, TrainingJob
from kubetrain.jobs.function import INSTALL_SCRIPT
from kubetrain.pipeline import fleet_findings
from kubetrain.rules.registry import get as rule
from platform_support import emitted

from examples.fashion_mnist import train_fashion_mnist

pytest.importorskip("torch", reason="run-local starts torchrun, which needs torch")

JOB = {"image": "img:1", "nodes": 2, "procs_per_node": 1, "resources": {"cpu": "1", "memory": "2Gi"}}

HELPERS = '''
import json
import numpy as np
import torch.nn.parallel as par
from torch import nn

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


def make_nested():
    def nested(steps: int):
        """Nested, as a notebook's function moved into a module: it closes over nothing.
        This line keeps its indentation."""
        import os
        return steps, os.sep
    return nested


class Trainer:
    def method(self):
        pass


async def coroutine():
    pass


def batch_snippet():
    # The Kubeflow guide's batch snippet: os is never imported.
    import torch
    import torch.distributed as dist

    dist.init_process_group(backend="gloo")
    local_rank = int(os.getenv("LOCAL_RANK", 0))
    return torch.zeros(local_rank)


def typo_and_helper():
    import os
    print(os.environ["RANK"], lenght([1]))
    return undefined_helper()


def uses_data_parallel(spelling: str):
    import torch
    import torch.nn as tnn
    from torch.nn.parallel import DataParallel as Parallel

    model = tnn.Linear(2, 2)
    wrap = {"nn": lambda: nn.DataParallel(model), "torch": lambda: torch.nn.DataParallel(model),
            "module": lambda: par.DataParallel(model), "alias": lambda: Parallel(model)}
    return wrap[spelling]()


def uses_ddp():
    import torch
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(torch.nn.Linear(2, 2))


def valid_scoping(items: list, scale: float = 1.0):
    # Names bound in every way Python allows, none of them undefined: no KT158.
    from typing import TYPE_CHECKING
    global COUNTER
    COUNTER = 0
    total = 0

    class Window:
        size = 3
        sizes = [2 * s for s in range(size)]  # the first iterable is read in the class scope

        def width(self):
            return self.size

    def bump():
        nonlocal total
        total += 1
        return total

    squares = {k: v * v for k, v in enumerate(items) if (last := v) is not None}
    pairs = [(a, b) for a in items for b in squares if a != b]
    gen = sum(x for x in items)
    tmp = 1
    del tmp
    try:
        import apex
    except ImportError:
        apex = None
    try:
        maybe_defined_elsewhere
    except NameError:
        pass
    if TYPE_CHECKING:
        from collections.abc import Sequence
        only_for_the_checker: Sequence
    with open(__file__) as handle:
        first = handle.readline()
    match items:
        case [head, *rest]:
            captured = head, rest
        case _:
            captured = None
    lam = (lambda y, z=scale: y * z)(2)
    return COUNTER, bump(), Window().width(), pairs, gen, last, apex, first, captured, lam, print, Exception


def nanogpt_style(max_iters: int = 10, eval_interval: int = 5, block_size: int = 8, batch_size: int = 4):
    # A GPT loop in the style of nanoGPT's train.py, as a function: nested helpers, a decorator from an import,
    # a context manager chosen at run time, comprehensions over dict items, f-strings.
    import math
    import os
    import time
    from contextlib import nullcontext

    import torch
    import torch.distributed as dist
    from torch.nn import functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP

    ddp = int(os.environ.get("RANK", -1)) != -1
    if ddp:
        dist.init_process_group(backend="gloo")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    ctx = nullcontext() if device == "cpu" else torch.amp.autocast(device_type=device, dtype=torch.bfloat16)
    data = {split: torch.randint(0, 64, (1000,)) for split in ("train", "val")}

    def get_batch(split):
        ix = torch.randint(len(data[split]) - block_size, (batch_size,))
        x = torch.stack([data[split][i:i + block_size] for i in ix])
        y = torch.stack([data[split][i + 1:i + 1 + block_size] for i in ix])
        return x.to(device), y.to(device)

    class Bigram(torch.nn.Module):
        def __init__(self, vocab: int = 64):
            super().__init__()
            self.table = torch.nn.Embedding(vocab, vocab)

        def forward(self, idx, targets=None):
            logits = self.table(idx)
            loss = None if targets is None else F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
            return logits, loss

    model = Bigram().to(device)
    raw = model
    if ddp:
        model = DDP(model)
    optimizer = torch.optim.AdamW(raw.parameters(), lr=1e-3)

    @torch.no_grad()
    def estimate_loss():
        out = {}
        model.eval()
        for split in ["train", "val"]:
            losses = torch.zeros(2)
            for k in range(2):
                X, Y = get_batch(split)
                with ctx:
                    _, loss = model(X, Y)
                losses[k] = loss.item()
            out[split] = losses.mean()
        model.train()
        return out

    def get_lr(it):
        return 1e-3 * 0.5 * (1.0 + math.cos(math.pi * it / max_iters))

    t0 = time.time()
    iter_num = 0
    while True:
        for group in optimizer.param_groups:
            group["lr"] = get_lr(iter_num)
        if iter_num % eval_interval == 0:
            losses = estimate_loss()
            print(f"step {iter_num}: train {losses['train']:.4f}, val {losses['val']:.4f}, {time.time() - t0:.1f}s")
        X, Y = get_batch("train")
        with ctx:
            _, loss = model(X, Y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        iter_num += 1
        if iter_num > max_iters:
            break
    if ddp:
        dist.destroy_process_group()


def uses_exec():
    exec("made_here = 1")
    return made_here
'''

FUTURE_HELPERS = '''
from __future__ import annotations


def postponed(steps: int) -> None:
    print(sorted(postponed.__annotations__.items()))
'''


def line_of(text: str) -> int:
    """The line of HELPERS (as fn_helpers.py) that holds `text`."""
    return next(i for i, line in enumerate(HELPERS.splitlines(), 1) if text in line)


@pytest.fixture(scope="module")
def helpers(tmp_path_factory):
    folder = tmp_path_factory.mktemp("helpers")
    (folder / "fn_helpers.py").write_text(HELPERS)
    (folder / "fn_future.py").write_text(FUTURE_HELPERS)
    sys.path.insert(0, str(folder))
    try:
        import fn_future
        import fn_helpers
        yield fn_helpers, fn_future
    finally:
        sys.path.remove(str(folder))


def problems(workload, nodes: int = 2, env: dict | None = None) -> list[tuple[str, str, str]]:
    app = App()
    TrainingJob(Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"]), "fn",
                {**JOB, "nodes": nodes, "workload": workload, "env": env or {}})
    return [(f.problem.code, f.problem.path, f.problem.message) for f in fleet_findings(app)]


def test_what_cannot_be_captured_faithfully_is_refused_with_its_reason(helpers):
    helpers, _ = helpers
    cases = [
        (Function(lambda: None), "workload.func", "a lambda"),
        (Function(helpers.make_closure(3)), "workload.func", "is a closure over n"),
        (Function(helpers.Trainer.method), "workload.func", "is a method of Trainer"),
        (Function(helpers.reads_a_constant, kwargs={"steps": 1}), "workload.func",
         f"reads 'SCALE' (fn_helpers.py line {line_of('return SCALE')}), a module-level float"),
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
    # Source that cannot be read: a function made by exec.
    made: dict = {"__name__": "generated"}
    exec("def made():\n    pass\n", made)
    [(code, _, message)] = problems(Function(made["made"]))
    assert code == "KT157" and "the source of generated.made cannot be read" in message
    # A function of __main__ (a notebook, a script run directly) has no module a pull request could show.
    main = type(helpers.top_level)(helpers.top_level.__code__, {"__name__": "__main__"}, "top_level")
    main.__module__ = "__main__"
    assert "a pull request must show the source of a module" in problems(Function(main, kwargs={"steps": 1}))[0][2]
    # A typo in the workload's own fields, with did-you-mean.
    found = problems(Function(helpers.top_level, kwarg={"steps": 1}))
    assert ("KT001", "workload.kwarg") in [f[:2] for f in found]
    # What the capture can honour: a module imported at module level that is listed in packages, and the stdlib.
    assert problems(Function(helpers.uses_numpy, packages=["numpy>=1.26"])) == []
    assert problems(Function(helpers.top_level, kwargs={"steps": 3})) == []


def test_a_source_file_edited_since_its_import_is_refused(tmp_path):
    (tmp_path / "fn_edited.py").write_text("def train():\n    return 1\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import fn_edited
    finally:
        sys.path.remove(str(tmp_path))
    (tmp_path / "fn_edited.py").write_text("def train():\n    return 2  # edited after the import\n")
    [(code, path, message)] = problems(Function(fn_edited.train))
    assert (code, path) == ("KT157", "workload.func") and "no longer holds the code that was imported" in message


@pytest.mark.processes
def test_nested_functions_are_captured_as_written_and_annotations_stay_what_they_were(helpers, tmp_path):
    helpers, future = helpers
    nested = Function(helpers.make_nested(), kwargs={"steps": 2})
    assert problems(nested) == []
    script = nested.files()["function.py"]
    # Dedented as the SDK dedents it, but not inside a string: its lines stay the file's.
    assert '\ndef nested(steps: int):\n    """Nested' in script
    assert '\n        This line keeps its indentation."""' in script
    assert "from __future__" not in script and script.rstrip().endswith("nested(**kwargs)")
    # The source runs as written: annotations are objects, unless its module postpones them.
    for function, call, expected in (
            (Function(helpers.top_level, kwargs={"steps": 1}), "print(top_level.__annotations__)",
             "{'steps': <class 'int'>, 'lr': <class 'float'>}"),
            (Function(future.postponed, kwargs={"steps": 1}), None, "[('return', 'None'), ('steps', 'int')]")):
        folder = tmp_path / function.func.__name__
        folder.mkdir()
        for name, text in function.files().items():
            (folder / name).write_text(text)
        script = function.script()
        assert ("\nfrom __future__ import annotations\n" in script) == (call is None)
        if call:
            (folder / "function.py").write_text(script.replace("top_level(**kwargs)", call))
        result = subprocess.run([sys.executable, str(folder / "function.py")], capture_output=True, text=True)
        assert result.returncode == 0 and result.stdout.strip() == expected, result.stdout + result.stderr


def test_names_nothing_defines_are_errors_at_synth_naming_the_line(helpers):
    helpers, _ = helpers
    [(code, path, message)] = problems(Function(helpers.batch_snippet))
    assert (code, path) == ("KT158", "workload.func")
    assert f"reads 'os' (fn_helpers.py line {line_of('os.getenv')})" in message
    assert "NameError on every rank" in message
    found = problems(Function(helpers.typo_and_helper))
    assert [(f[0], f[2].split(" (")[0]) for f in found] == [
        ("KT158", "fn_helpers.typo_and_helper reads 'lenght'"),
        ("KT158", "fn_helpers.typo_and_helper reads 'undefined_helper'")]
    # Valid code of every scoping kind, the Kubeflow guide's fashion-mnist function, and code that binds names
    # where no scope shows them: nothing reported.
    assert problems(Function(helpers.valid_scoping, kwargs={"items": [1, 2]})) == []
    assert problems(Function(helpers.nanogpt_style)) == []
    helpers.valid_scoping([1, 2])  # and they are valid: they run
    if "RANK" not in os.environ:
        helpers.nanogpt_style(max_iters=2, eval_interval=2)
    assert problems(Function(train_fashion_mnist)) == []
    assert problems(Function(helpers.uses_exec)) == []


def test_data_parallel_in_a_function_of_several_ranks_is_a_warning_naming_ddp(helpers):
    helpers, _ = helpers
    lines = ", ".join(str(line_of(text)) for text in ('"nn": lambda', '"module": lambda'))
    for spelling in ("nn", "torch", "module", "alias"):
        found = problems(Function(helpers.uses_data_parallel, kwargs={"spelling": spelling}))
        assert [f[:2] for f in found] == [("KT159", "workload.func")], (spelling, found)
        assert f"uses torch.nn.DataParallel (fn_helpers.py lines {lines})" in found[0][2]
        assert "up to 2 ranks" in found[0][2]
    assert "DistributedDataParallel" in rule("KT159").fix
    # One rank may drive all its GPUs with it; DDP is what the warning asks for.
    assert problems(Function(helpers.uses_data_parallel, kwargs={"spelling": "nn"}), nodes=1) == []
    assert problems(Function(helpers.uses_ddp)) == []


def test_package_indexes_are_urls_without_credentials_which_a_secret_holds(helpers, crds):
    helpers, _ = helpers

    def indexes(*urls):
        return problems(Function(helpers.top_level, kwargs={"steps": 1}, packages=["numpy"],
                                 pip_index_urls=list(urls)))

    for url, reason in (("pypi.org/simple", "is not an index URL"),
                        ("https://user:s3cret@pypi.corp/simple", "has credentials in it (user:password@)"),
                        ("https://pypi.corp/simple?token=abc", "has credentials in its query (token)"),
                        ("https://pypi.corp/simple/${TOKEN}", "has spaces or a ${...} reference")):
        [(code, path, message)] = indexes("https://pypi.org/simple", url)
        assert (code, path) == ("KT160", "workload.pip_index_urls.1") and reason in message, message
        assert "s3cret" not in message and "abc" not in message
    [(code, path, _)] = indexes({"secret": "pypi", "key": "url/x"})
    assert (code, path) == ("KT160", "workload.pip_index_urls.0.key")
    # In the job's own env, as pip's variables, a credential is in git all the same.
    found = problems(Function(helpers.top_level, kwargs={"steps": 1}),
                     env={"PIP_EXTRA_INDEX_URL": "https://pypi.org/simple https://u:p@pypi.corp/simple"})
    assert [f[:2] for f in found] == [("KT160", "env.PIP_EXTRA_INDEX_URL")]

    # The Secret's URL reaches pip through the pod's environment, never through the ConfigMap; the API server
    # accepts the pod (strict schemas).
    c = Cluster(App(), "c", kubernetes_version="1.33", namespaces=["ml"])
    TrainingJob(c, "fn", {**JOB, "target": PyTorchJob(), "workload": Function(
        helpers.top_level, kwargs={"steps": 1}, packages=["numpy==2.*"],
        pip_index_urls=["https://pypi.org/simple", PipIndexSecret(secret="corp-pypi", key="url"),
                        "http://devpi.tools.svc:3141/root/pypi/+simple/"])})
    assert fleet_findings(c) == []
    objects = emitted(c, crds)
    [config] = [o for name, o in objects.items() if name.startswith("ConfigMap/fn")]
    assert config["data"]["requirements.txt"] == (
        "--index-url https://pypi.org/simple\n--extra-index-url ${KUBETRAIN_PIP_INDEX_1}\n"
        "--extra-index-url http://devpi.tools.svc:3141/root/pypi/+simple/\n"
        "--trusted-host devpi.tools.svc:3141\nnumpy==2.*\n")
    [pod] = [o["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"] for o in objects.values()
             if o["kind"] == "PyTorchJob"]
    env = pod["containers"][0]["env"]
    assert {"name": "KUBETRAIN_PIP_INDEX_1",
            "valueFrom": {"secretKeyRef": {"name": "corp-pypi", "key": "url"}}} in env
    # The launcher's own variable: a job's env cannot set it.
    found = problems(Function(helpers.top_level, kwargs={"steps": 1}, packages=["numpy"],
                              pip_index_urls=[PipIndexSecret(secret="corp-pypi", key="url")]),
                     env={"KUBETRAIN_PIP_INDEX_0": "https://pypi.org/simple"})
    assert [f[:2] for f in found] == [("KT105", "env.KUBETRAIN_PIP_INDEX_0")]


@pytest.mark.processes
def test_an_image_without_pip_gets_ensurepips_own_and_pth_files_are_processed(tmp_path):
    # A Python with no pip (a venv made without one, as uv makes them): the launcher's install lines bootstrap
    # pip into the packages' emptyDir with ensurepip and install from there; the image gets nothing.
    image = tmp_path / "image"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(image)], check=True)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    wheel(wheels)
    (tmp_path / "requirements.txt").write_text(f"--no-index\n--find-links {wheels}\nkubetrain-fixture-hello==1.0\n")
    packages = tmp_path / "packages"
    packages.mkdir()
    check = ("python - <<'EOF'\nimport os, site, sys\n"
             "for folder in os.environ['KUBETRAIN_SITE_DIRS'].split(os.pathsep):\n    site.addsitedir(folder)\n"
             "import kubetrain_fixture_hello, greeting_extra\n"
             "print(kubetrain_fixture_hello.hello(greeting_extra.WORD))\nEOF\n")
    env = {"PATH": f"{image / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path), "KUBETRAIN_PACKAGES": str(packages),
           "KUBETRAIN_REQUIREMENTS": str(tmp_path / "requirements.txt")}
    result = subprocess.run(["/bin/sh", "-c", INSTALL_SCRIPT + check], env=env, capture_output=True, text=True,
                            timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "extra, packaged"
    assert list((packages / ".pip").glob("**/pip/__init__.py"))  # ensurepip's pip, in the emptyDir
    assert not list(image.glob("lib/*/site-packages/pip"))  # and none in the image
    # An image with neither pip nor ensurepip fails at once, saying so.
    no_ensurepip = tmp_path / "no-ensurepip"
    no_ensurepip.mkdir()
    (no_ensurepip / "python").write_text(f'#!/bin/sh\nexec "{image / "bin" / "python"}" -I -c "import sys; '
                                         'sys.exit(1)" "$@"\n')
    (no_ensurepip / "python").chmod(0o755)
    result = subprocess.run(["/bin/sh", "-c", INSTALL_SCRIPT], env={**env, "PATH": f"{no_ensurepip}:/usr/bin:/bin"},
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1 and "the image has no pip, and ensurepip could not provide one" in result.stderr


@pytest.mark.processes
def test_the_dev_function_job_holds_the_guides_source_and_runs_under_run_local(tmp_path):
    # The committed ConfigMap: what the pull request shows.
    [path] = (ROOT / "dist" / "dev" / "ml-dev").glob("ConfigMap.fashion-mnist-*-config.yaml")
    config = yaml.safe_load(path.read_text())
    source = config["data"]["function.py"]
    assert "def train_fashion_mnist(" in source and "nn.parallel.DistributedDataParallel" in source
    assert "from __future__" not in source  # the guide's module has none: its source runs as written
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
from fleet.work import make_function


def build():
    app = App()
    cluster = Cluster(app, "c", kubernetes_version="1.33", namespaces=["ml"])
    TrainingJob(cluster, "fn", image="img:1", nodes=2, procs_per_node=1, resources={{"cpu": "1", "memory": "2Gi"}},
                workload=Function(make_function(), kwargs={{"greeting": "hello"}},
                                  packages=["kubetrain-fixture-hello==1.0"],
                                  pip_index_urls=["{index}/primary/", "{index}/extra/"]))
    return app
'''

# The Kubeflow SDK's first example (kubeflow/sdk README, `get_torch_dist`), as a notebook's function moved into a
# module: nested in the cell's builder, with a nested helper, and a package that only an extra index has.
WORK = '''
def make_function():
    def get_torch_dist(greeting: str):
        import os

        import torch.distributed as dist

        def describe(rank: int) -> str:
            import greeting_extra  # on the path only through the package's .pth file
            import kubetrain_fixture_hello

            return f"{kubetrain_fixture_hello.hello(greeting)} ({greeting_extra.WORD}) from rank {rank}"

        dist.init_process_group(backend="gloo")
        print("PyTorch Distributed Environment")
        print(f"WORLD_SIZE: {dist.get_world_size()}")
        print(describe(dist.get_rank()), "LOCAL_RANK", os.environ["LOCAL_RANK"])
        dist.destroy_process_group()

    return get_torch_dist
'''


def wheel(folder: Path) -> Path:
    """A real wheel of a package no image has, with a .pth file that puts a folder of its own on the path."""
    files = {"kubetrain_fixture_hello/__init__.py": 'def hello(word):\n    return f"{word}, packaged"\n',
             "kubetrain_fixture_hello.pth": "kubetrain_fixture_hello_extra\n",
             "kubetrain_fixture_hello_extra/greeting_extra.py": 'WORD = "extra"\n',
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


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def package_index(tmp_path):
    """Two PEP 503 simple indexes served over HTTP from a folder (no internet): `primary/` has nothing,
    `extra/` the fixture's wheel. Yields (base URL, the extra index's project folder)."""
    root = tmp_path / "index"
    (root / "primary").mkdir(parents=True)
    (root / "primary" / "index.html").write_text("<!DOCTYPE html><html><body></body></html>\n")
    project = root / "extra" / "kubetrain-fixture-hello"
    project.mkdir(parents=True)
    built = wheel(project)
    digest = hashlib.sha256(built.read_bytes()).hexdigest()
    (root / "extra" / "index.html").write_text(
        '<!DOCTYPE html><html><body><a href="kubetrain-fixture-hello/">kubetrain-fixture-hello</a></body></html>\n')
    (project / "index.html").write_text(f'<!DOCTYPE html><html><body><a href="{built.name}#sha256={digest}">'
                                        f'{built.name}</a></body></html>\n')
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", project
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.processes
def test_a_kubeflow_sdk_function_with_an_extra_index_and_a_nested_helper_runs_under_run_local(tmp_path, package_index):
    index, project = package_index
    (tmp_path / "fleet").mkdir()
    (tmp_path / "fleet" / "work.py").write_text(textwrap.dedent(WORK))
    (tmp_path / "fleet" / "__init__.py").write_text(FLEET.format(index=index))
    result = kubetrain("synth", "--app", "fleet", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    [config] = (tmp_path / "dist" / "c" / "ml").glob("ConfigMap.fn*-config.yaml")
    data = yaml.safe_load(config.read_text())["data"]
    assert data["requirements.txt"] == (f"--index-url {index}/primary/\n--extra-index-url {index}/extra/\n"
                                        f"--trusted-host {index.removeprefix('http://')}\n"
                                        "kubetrain-fixture-hello==1.0\n")
    assert "\ndef get_torch_dist(greeting: str):\n    import os\n" in data["function.py"]  # dedented, as written
    # pip reads only the indexes the job names (none of this machine's pip configuration).
    isolated = {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "0", "PIP_NO_CACHE_DIR": "1"}
    result = kubetrain("run-local", "c/fn", "--workdir", str(tmp_path / "w"), "--dist", str(tmp_path / "dist"),
                       env=isolated)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for rank in (0, 1):
        assert f"hello, packaged (extra) from rank {rank} LOCAL_RANK 0" in result.stdout, result.stdout[-3000:]
    assert "WORLD_SIZE: 2" in result.stdout
    # Installed into the pod's own emptyDir, not into this interpreter.
    assert list((tmp_path / "w" / "pods").glob("*/kubetrain-packages/**/kubetrain_fixture_hello/__init__.py"))
    assert "kubetrain_fixture_hello" not in sys.modules
    # A package the indexes do not have fails the pod with pip's own message.
    shutil.rmtree(project)
    result = kubetrain("run-local", "c/fn", "--workdir", str(tmp_path / "w2"), "--dist", str(tmp_path / "dist"),
                       env=isolated)
    assert result.returncode != 0 and "installing the function's packages failed" in result.stdout
    assert "kubetrain-fixture-hello" in result.stdout

    # The pull request's diff shows the code that changed.
    (tmp_path / "fleet" / "work.py").write_text(textwrap.dedent(WORK).replace("from rank", "on rank"))
    git = ["git", "-C", str(tmp_path)]
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]):
        subprocess.run([*git, *args], check=True)
    assert kubetrain("synth", "--app", "fleet", cwd=tmp_path).returncode == 0
    diff = kubetrain("diff", cwd=tmp_path)
    assert diff.returncode == 0, diff.stderr
    assert "on rank" in diff.stdout and "from rank" in diff.stdout, diff.stdout
