"""`kubetrain run-local`: run a committed PyTorchJob on this machine, as the operator would run it.

It reads the job and its ConfigMap from dist/ (not from Python: what runs is what was committed),
starts one local process per replica with the environment the training operator injects
(shared/domain-facts.md section 1), and maps every volume to a folder under the work dir:
PersistentVolumeClaims to `<workdir>/volumes/<claim>/` (shared by all pods, as RWX storage),
ConfigMaps and emptyDirs to `<workdir>/pods/<pod>/<volume>/`. Paths in the command line and in
the run config (checkpoint.dir, data.path) are rewritten through the same mapping.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from training.config import RunConfig
from training.problems import ConfigError, Problem, validate_model


@dataclass
class LocalPod:
    name: str  # e.g. master-0
    node_rank: int
    command: list[str]
    env: dict[str, str]
    mounts: dict[str, Path] = field(default_factory=dict)  # mountPath -> local folder


def _fail(where: str, message: str, fix: str) -> ConfigError:
    return ConfigError(where, [Problem("KT301", "", message, fix)])


def find_job(dist: Path, ref: str) -> Path:
    """`[cluster/]job` -> the job's manifest file under dist/."""
    cluster, _, name = ref.rpartition("/")
    matches = sorted(dist.glob(f"{cluster or '*'}/*/PyTorchJob.{name}.yaml"))
    if len(matches) != 1:
        found = "no PyTorchJob" if not matches else f"{len(matches)} PyTorchJobs ({', '.join(map(str, matches))})"
        raise _fail(ref, f"{found} named {name!r} in {dist}/{cluster or '*'}",
                    "name a job that `kubetrain synth` wrote, as CLUSTER/JOB")
    return matches[0]


def _map_path(path: str, mounts: dict[str, Path]) -> str:
    """A path inside the pod -> the local path, through the longest matching mount."""
    for mount in sorted(mounts, key=len, reverse=True):
        if PurePosixPath(path).is_relative_to(mount):
            return str(mounts[mount] / PurePosixPath(path).relative_to(mount))
    return path


_ENV_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand_env_refs(arg: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion in command and args: defined variables only; $$ escapes."""
    return _ENV_REF.sub(lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)), arg)


def free_port() -> int:
    """A TCP port nobody listens on now, for a local rendezvous or store."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def plan_pods(job_file: Path, workdir: Path, steps: int | None, overrides: list[str]) -> list[LocalPod]:
    job = yaml.safe_load(job_file.read_text())
    name, spec = job["metadata"]["name"], job["spec"]
    where = f"{job_file.parent.parent.name}/{name}"
    nproc = spec.get("nprocPerNode", "auto")
    if not str(nproc).isdigit():
        raise _fail(where, f"nprocPerNode {nproc!r} depends on the node", "run-local needs an integer nprocPerNode")
    replicas = [(kind.lower(), i, spec["pytorchReplicaSpecs"][kind]["template"])
                for kind in ("Master", "Worker") if kind in spec["pytorchReplicaSpecs"]
                for i in range(spec["pytorchReplicaSpecs"][kind].get("replicas", 1))]
    operator_env, has_master = _operator_env(spec, len(replicas))
    pods = []
    for node_rank, (kind, index, template) in enumerate(replicas):
        pod_name = f"{kind}-{index}"
        container = next(c for c in template["spec"]["containers"] if c["name"] == "pytorch")
        _check_resources(container, where)
        mounts = _materialize_volumes(template["spec"].get("volumes", []), container, job_file, workdir / "pods" /
                                      pod_name, workdir / "volumes", where)
        pod_env = {**{e["name"]: e["value"] for e in container.get("env", []) if "value" in e}, **operator_env}
        if has_master:  # ranks by pod index; elastic jobs get theirs from each rendezvous
            pod_env |= {"RANK": str(node_rank), "PET_NODE_RANK": str(node_rank)}
        command = [_map_path(expand_env_refs(arg, pod_env), mounts)
                   for arg in [*container.get("command", []), *container.get("args", [])]]
        if command[:1] == ["torchrun"]:
            command = [sys.executable, "-m", "torch.distributed.run", *command[1:]]
        command += _config_overrides(command, mounts, steps, overrides, where)
        pods.append(LocalPod(pod_name, node_rank, command, {**os.environ, **pod_env}, mounts))
    return pods


def _operator_env(spec: dict[str, Any], pods: int) -> tuple[dict[str, str], bool]:
    """What the operator injects into every pod (domain-facts section 1), with Service names
    replaced by loopback: all "pods" share this machine's network."""
    env = {"PYTHONUNBUFFERED": "1"}
    nproc = str(spec.get("nprocPerNode", "auto"))
    has_master = "Master" in spec["pytorchReplicaSpecs"]
    if has_master:
        port = str(free_port())
        env |= {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port, "PET_MASTER_ADDR": "127.0.0.1",
                "PET_MASTER_PORT": port, "PET_NPROC_PER_NODE": nproc, "WORLD_SIZE": str(pods * int(nproc))}
    elastic = spec.get("elasticPolicy")
    if elastic is None:
        env["PET_NNODES"] = str(pods)
        return env, has_master
    # The rendezvous lives on the first worker; its port is a second one here, as it is on
    # another pod in a cluster.
    env |= {"PET_RDZV_ENDPOINT": f"127.0.0.1:{free_port()}", "PET_RDZV_BACKEND": elastic.get("rdzvBackend", "c10d"),
            "PET_NNODES": f"{elastic.get('minReplicas', pods)}:{elastic.get('maxReplicas', pods)}"}
    if "maxRestarts" in elastic:
        env["PET_MAX_RESTARTS"] = str(elastic["maxRestarts"])
    return env, has_master


def _check_resources(container: dict[str, Any], where: str) -> None:
    gpus = int((container.get("resources", {}).get("limits") or {}).get("nvidia.com/gpu", 0))
    if gpus and shutil.which("nvidia-smi") is None:
        raise _fail(where, f"each pod requests {gpus} GPUs and this machine has none",
                    "run-local runs CPU jobs (like dev's); run GPU jobs on a GPU machine or in the cluster")
    if importlib.util.find_spec("torch") is None:
        raise _fail(where, "torch is not installed, so the training runtime cannot start",
                    "pip install torch, then pip install -e '.[train]'")


def _materialize_volumes(volumes: list[dict], container: dict, job_file: Path, pod_dir: Path, claims_dir: Path,
                         where: str) -> dict[str, Path]:
    by_name = {v["name"]: v for v in volumes}
    mounts = {}
    for mount in container.get("volumeMounts", []):
        volume = by_name[mount["name"]]
        if "persistentVolumeClaim" in volume:
            local = claims_dir / volume["persistentVolumeClaim"]["claimName"]
        elif "configMap" in volume:
            local = pod_dir / mount["name"]
            config_map = job_file.parent / f"ConfigMap.{volume['configMap']['name']}.yaml"
            if not config_map.is_file():
                raise _fail(where, f"ConfigMap {volume['configMap']['name']} is not in {job_file.parent}",
                            "run `kubetrain synth` so dist/ holds the job's ConfigMap")
            local.mkdir(parents=True, exist_ok=True)
            for key, text in (yaml.safe_load(config_map.read_text()).get("data") or {}).items():
                (local / key).write_text(text)
        elif "emptyDir" in volume:
            local = pod_dir / mount["name"]
        else:
            raise _fail(where, f"volume {mount['name']} is of a kind run-local cannot map",
                        "use PersistentVolumeClaim, ConfigMap or emptyDir volumes")
        local.mkdir(parents=True, exist_ok=True)
        mounts[mount["mountPath"]] = local.resolve()
    return mounts


def _config_overrides(command: list[str], mounts: dict[str, Path], steps: int | None, overrides: list[str],
                      where: str) -> list[str]:
    """`--set` arguments for the training entrypoint: the run config's paths mapped, then the user's."""
    if "--config" not in command:
        raise _fail(where, "the container does not run `-m training --config`", "run-local runs kubetrain jobs")
    config_file = Path(command[command.index("--config") + 1])
    run = validate_model(RunConfig, yaml.safe_load(config_file.read_text()), str(config_file))
    sets = [f"checkpoint.dir={_map_path(run.checkpoint.dir, mounts)}"]
    if run.data.path:
        sets.append(f"data.path={_map_path(run.data.path, mounts)}")
    if steps is not None:
        sets.append(f"max_steps={steps}")
    sets += overrides
    return [arg for value in sets for arg in ("--set", value)]


def run_pods(pods: list[LocalPod]) -> int:
    """Start every pod, stream its output prefixed by its name; the job's status is the first failure's."""
    lock = threading.Lock()
    processes = [subprocess.Popen(pod.command, env=pod.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, start_new_session=True) for pod in pods]

    def pump(pod: LocalPod, process: subprocess.Popen) -> None:
        for line in process.stdout:
            with lock:
                sys.stdout.write(f"[{pod.name}] {line}")
                sys.stdout.flush()

    threads = [threading.Thread(target=pump, args=pair, daemon=True) for pair in zip(pods, processes)]
    for thread in threads:
        thread.start()
    status = 0
    # `kubectl delete` or a CI timeout sends SIGTERM: stop the pods too (they have sessions of their own).
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        pending = list(processes)
        while pending:
            for process in list(pending):
                code = process.poll()
                if code is None:
                    continue
                pending.remove(process)
                if code and not status:
                    status = code
                    _terminate(pending)  # a failed pod fails the job: stop the others
            if pending:
                threading.Event().wait(0.2)
    except KeyboardInterrupt:
        _terminate(processes)
        status = 130
    for thread in threads:
        thread.join()
    return status


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _terminate(processes: list[subprocess.Popen]) -> None:
    for process in processes:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            kill_pod(process.pid)


def kill_pod(pid: int) -> None:
    """SIGKILL a process and all its descendants, as deleting its pod would. torchrun starts its
    workers in sessions of their own, so killing the agent's process group would orphan them."""
    if not Path("/proc/self/task").is_dir():  # no procfs: the pod's process group will have to do
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)
        return
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        os.kill(pid, signal.SIGKILL)
    except (FileNotFoundError, ProcessLookupError):
        return
    for child in children:
        kill_pod(int(child))
