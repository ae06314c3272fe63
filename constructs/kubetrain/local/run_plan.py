"""`kubetrain run-local`'s plan: a committed job, read from dist/, as the local processes that run its pods.

It reads the job (and its ConfigMap) from dist/, not from Python: what runs is what was
committed. The job's kind (kubetrain.kinds: its descriptor's target) says which pods the operator would start,
with what environment and restart policy; the plan gives each pod one local process with that
environment (addresses on loopback), maps every volume to a folder under the work dir
(PersistentVolumeClaims to `<workdir>/volumes/<claim>/`, shared by all pods as RWX storage;
ConfigMaps, Secrets and emptyDirs to `<workdir>/pods/<pod>/<volume>/`), and rewrites paths in the
command line and the run config through the same mapping. Everything is checked here, before the first
pod starts (supervisor.py starts them). Where the operator has a status endpoint (Kubeflow Trainer's, for a
TrainJob), the plan makes a CA and a token for the run and hands every pod its variables; the supervisor serves it.
"""

from __future__ import annotations

import importlib.util
import os
import re
import secrets
import shutil
import socket
import stat
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from kubetrain.kinds.kind_registry import all_kinds, kind_of
from kubetrain.local.certificates import ServerTLS
from kubetrain.model.manifests import UnreadableManifest, read_manifest
from kubetrain.model.vocabulary import DEFAULT_TERMINATION_GRACE_S, GPU_RESOURCE, NEURON_RESOURCE
from kubetrain.rules.registry import register
from kubetrain_runtime.problems import ConfigError, Problem
from kubetrain_runtime.progress import ENV_CA_CERT, ENV_TOKEN
from kubetrain_runtime.runtime_config import JOB_ENV, RUNTIME_CONFIG_ENV, own_loop_defaults
from kubetrain_runtime.spelling import did_you_mean
from training.config import load_run_config

CANNOT_RUN = register(
    "KT301", "error", "run-local cannot run this job here",
    rationale="run-local runs what was committed, on this machine's CPUs: the job must be in dist/, need no GPUs, "
              "and use volumes that map to local folders; trainer jobs need torch installed.",
    fix="name a job that `kubetrain synth` wrote, as CLUSTER/JOB; run GPU jobs in the cluster",
    source="README.md (The training runtime)", checked_by=("run-local",))


@dataclass
class LocalPod:
    name: str  # e.g. master-0
    command: list[str]
    env: dict[str, str]
    restart_policy: str
    cwd: Path | None = None
    mounts: dict[str, Path] = field(default_factory=dict)  # mountPath -> local folder
    grace_s: float = DEFAULT_TERMINATION_GRACE_S  # terminationGracePeriodSeconds: from the stop signal to the kill


@dataclass
class StatusEndpointPlan:
    """The operator's status endpoint as run-local serves it: on loopback, with a CA and a token of the run's own.
    It listens just before the pods start, on a port free_port hands out then; the pods' URL is set then."""

    status_object: dict[str, Any]  # the committed object whose status the posts update
    token: str
    tls: ServerTLS


@dataclass
class LocalJob:
    pods: list[LocalPod]
    backoff_limit: int
    fail_job_exit_codes: set[int] = field(default_factory=set)
    per_pod_backoff: bool = False
    name: str = "job"  # as the user named it: CLUSTER/JOB
    trainer: bool = False  # runs kubetrain's trainer, whose JSON lines the summary reads
    status_endpoint: StatusEndpointPlan | None = None
    notes: list[str] = field(default_factory=list)  # said before the pods start


def _fail(where: str, message: str, fix: str = CANNOT_RUN.fix) -> ConfigError:
    return ConfigError(where, [Problem(CANNOT_RUN.code, "", message, fix)])


def _read_yaml(path: Path, where: str) -> dict[str, Any] | None:
    """The object of one manifest file (None for an empty one)."""
    try:
        documents = read_manifest(str(path), path.read_bytes())
    except OSError as exc:
        raise _fail(where, f"cannot read {path}: {exc.strerror}", "run `kubetrain synth` to rewrite dist/") from None
    except UnreadableManifest as exc:
        raise _fail(where, f"cannot read {path}{f' (line {exc.line})' if exc.line else ''}: {exc.reason}",
                    exc.fix) from None
    return documents[0] if documents else None


def outside(dist: Path, workdir: Path) -> Path:
    """`workdir`, refused when it lies in `dist`: synth replaces dist/ whole (and refuses a dist/ holding files it
    did not write, KT601), and git would carry the run's checkpoints into the pull request."""
    if workdir.resolve() == dist.resolve() or dist.resolve() in workdir.resolve().parents:
        raise _fail(str(workdir), f"--workdir {workdir} is inside {dist}/, which `kubetrain synth` writes",
                    "choose a folder outside dist/, e.g. the default .run-local/<cluster>-<job>")
    return workdir


def find_job(dist: Path, ref: str) -> Path:
    """`[cluster/]job` -> the job's manifest file under dist/, whatever its target. A create-once run's
    file is `<Kind>.<job>-<hash>.yaml`: the job is found by its own name either way."""
    if not dist.is_dir():
        raise _fail(ref, f"{dist} is not a folder", "run `kubetrain synth` to write dist, or give --dist the folder "
                    "it wrote")
    cluster, _, name = ref.rpartition("/")
    runs = committed_runs(dist)
    run_name = re.compile(rf"^{re.escape(name)}(-[0-9a-f]{{8}})?$")
    matches = [(c, job, path) for c, job, path in runs
               if run_name.match(path.name.split(".", 1)[1].removesuffix(".yaml")) and cluster in ("", c)]
    if len(matches) == 1:
        return matches[0][2]
    if matches:
        raise _fail(ref, f"{len(matches)} jobs named {name!r} in {dist} ({', '.join(str(m[2]) for m in matches)})",
                    f"name one as CLUSTER/JOB: {', '.join(sorted({f'{c}/{job}' for c, job, _ in matches}))}")
    qualified = sorted({f"{c}/{job}" for c, job, _ in runs})
    names = [*qualified, *({job for _, job, _ in runs} if not cluster else ())]
    raise _fail(ref, f"no job named {name!r} in {dist}/{cluster or '*'}",
                f"{did_you_mean(ref, names)}name a job that `kubetrain synth` wrote, as CLUSTER/JOB (the jobs: "
                f"{', '.join(qualified) or 'none'})")


def committed_runs(dist: Path) -> list[tuple[str, str, Path]]:
    """(cluster, job, manifest file) of every run object under dist/<cluster>/<namespace>/; a create-once run's
    file is `<Kind>.<job>-<hash>.yaml`, its job the name without the hash."""
    kinds = {kind.kind for kind in all_kinds() if kind.target is not None}
    return [(path.parent.parent.name, _RUN_HASH.sub("", path.name.split(".", 1)[1].removesuffix(".yaml")), path)
            for path in sorted(dist.glob("*/*/*.yaml")) if path.name.split(".")[0] in kinds]


_RUN_HASH = re.compile(r"-[0-9a-f]{8}$")


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


_HANDED_OUT: set[int] = set()


def free_port() -> int:
    """A TCP port nobody listens on now and not handed out before, for a local rendezvous, store or endpoint: the
    ports it hands out are bound only when the pods start, and the system may offer a closed one again meanwhile."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def plan_local_run(job_file: Path, workdir: Path, steps: int | None, overrides: list[str]) -> LocalJob:
    """The committed job in `job_file` as local pods under `workdir`, with the user's --steps and --set applied."""
    where = f"{job_file.parent.parent.name}/{job_file.name.split('.', 1)[1].removesuffix('.yaml')}"
    manifest = _read_yaml(job_file, where)
    kind = kind_of(manifest) if isinstance(manifest, dict) else None
    target = kind.target if kind is not None else None
    if target is None:
        raise _fail(where, f"{job_file} is not a job of a known target", "run `kubetrain synth` to rewrite dist/")
    def sibling(kind: str, name: str) -> dict[str, Any] | None:
        path = job_file.parent / f"{kind}.{name}.yaml"
        return _read_yaml(path, where) if path.is_file() else None

    try:
        plan = target.local_plan(manifest, free_port, sibling)
    except (LookupError, KeyError, TypeError, ValueError) as exc:
        raise _fail(where, f"{job_file} cannot be run: {exc}", "run `kubetrain synth` to rewrite dist/") from None
    containers = []
    for replica in plan.replicas:  # every check before anything is written
        container = next((c for c in replica.template["spec"]["containers"] if c["name"] == plan.container_name),
                         None)
        if container is None:
            raise _fail(where, f"pod {replica.name} has no container {plan.container_name!r}",
                        "run `kubetrain synth` to rewrite dist/")
        _check_resources(container, where)
        _check_run_config(replica.template, container, job_file, steps, overrides, where)
        containers.append(container)
    try:
        bin_dir = _launcher_shims(workdir)
    except OSError as error:  # a file where the folder would be, or a folder this user cannot write
        raise _fail(where, f"cannot use --workdir {workdir}: {error.strerror or error}",
                    "give --workdir a folder you can write (it is created when missing)") from None
    endpoint, notes = _status_endpoint(plan.status_object, workdir)
    pods = []
    for replica, container in zip(plan.replicas, containers):
        mounts = _materialize_volumes(replica.template["spec"].get("volumes", []), container, job_file,
                                      workdir / "pods" / replica.name, workdir / "volumes", where)
        pod_env = {**{e["name"]: _map_path(e["value"], mounts) for e in container.get("env", []) if "value" in e},
                   **replica.env, **_status_endpoint_env(endpoint, workdir / "pods" / replica.name)}
        command = [_map_path(expand_env_refs(arg, pod_env), mounts)
                   for arg in [*container.get("command", []), *container.get("args", [])]]
        command += _config_overrides(command, mounts, steps, overrides, where)
        if "--config" not in command:  # a loop of the user's own: its runtime reads its own config
            pod_env |= _own_loop_metrics_port(pod_env, workdir / "pods" / replica.name)
        # A container's /tmp is its own: the pod's here (the launcher keeps its failure note there).
        tmp = (workdir / "pods" / replica.name / "tmp").resolve()
        tmp.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **pod_env, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "TMPDIR": str(tmp)}
        cwd = Path(_map_path(container["workingDir"], mounts)) if "workingDir" in container else None
        grace = replica.template["spec"].get("terminationGracePeriodSeconds", DEFAULT_TERMINATION_GRACE_S)
        pods.append(LocalPod(replica.name, command, env, replica.restart_policy, cwd, mounts, grace))
    trainer = any("--config" in pod.command for pod in pods)
    return LocalJob(pods, plan.backoff_limit, plan.fail_job_exit_codes, plan.per_pod_backoff, where, trainer,
                    endpoint, notes)


def _own_loop_metrics_port(pod_env: dict[str, str], pod_dir: Path) -> dict[str, str]:
    """In a kubetrain job a loop of the user's own serves Prometheus metrics on the runtime's port (9400 unless its
    runtime config says otherwise, kubetrain_runtime/runtime_config.py); the pods of a local run share this
    machine's ports, so each gets one of its own: the job's runtime config (if any) with `metrics.port` replaced,
    written in the pod's folder and named by KUBETRAIN_RUNTIME_CONFIG. A config the runtime cannot read is left for
    the runtime to report; a port of 0 (no endpoint) stays 0. A pod of several ranks serves port + local rank: the
    ports after the one handed out are the system's to keep free."""
    seen = {**os.environ, **pod_env}  # what the pod's process will read: the caller's environment under the pod's
    if not seen.get(JOB_ENV):
        return {}
    layered: Any = {}
    if seen.get(RUNTIME_CONFIG_ENV):
        try:
            layered = yaml.safe_load(Path(seen[RUNTIME_CONFIG_ENV]).read_text(encoding="utf-8")) or {}
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            return {}
    metrics = layered.get("metrics", {}) if isinstance(layered, dict) else None
    if not isinstance(metrics, dict) or metrics.get("port", own_loop_defaults(in_job=True)["metrics"]["port"]) == 0:
        return {}
    layered["metrics"] = {**metrics, "port": free_port()}
    path = (pod_dir / "kubetrain-runtime-config.yaml").resolve()
    path.write_text(yaml.safe_dump(layered, sort_keys=False), encoding="utf-8")
    return {RUNTIME_CONFIG_ENV: str(path)}


def _status_endpoint(status_object: dict[str, Any] | None, workdir: Path) -> tuple[StatusEndpointPlan | None,
                                                                                  list[str]]:
    """The status endpoint to serve, when the operator has one: a throwaway CA under `workdir`, a random token."""
    if status_object is None:
        return None, []
    try:
        from kubetrain.local.certificates import throwaway_ca
    except ImportError:  # cryptography is missing: the job runs, without its endpoint
        return None, [("no status endpoint: it needs the `cryptography` package (pip install -e '.[train]'); "
                       "the job runs without it, as on a cluster without the TrainJobStatus feature gate")]
    tls = throwaway_ca(workdir / "status-endpoint")
    return StatusEndpointPlan(status_object, secrets.token_urlsafe(32), tls), []


def _status_endpoint_env(endpoint: StatusEndpointPlan | None, pod_dir: Path) -> dict[str, str]:
    """The pod's view of the endpoint, as the operator's projected volume gives it: the CA and the token as files
    (at /var/run/secrets/kubeflow/trainer in a cluster, here in the pod's folder) and their paths; the URL comes
    when the endpoint listens."""
    if endpoint is None:
        return {}
    folder = (pod_dir / "kubeflow-trainer").resolve()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ca.crt").write_bytes(endpoint.tls.ca_cert.read_bytes())
    token = folder / "token"
    token.touch(mode=0o600)
    token.write_text(endpoint.token)
    return {ENV_CA_CERT: str(folder / "ca.crt"), ENV_TOKEN: str(token)}


def _check_run_config(template: dict[str, Any], container: dict[str, Any], job_file: Path, steps: int | None,
                      overrides: list[str], where: str) -> None:
    """A trainer job's run config with the user's --set and --steps, validated from dist/ before any pod starts."""
    args = [*container.get("command", []), *container.get("args", [])]
    if "--config" not in args:
        if steps is not None or overrides:
            raise _fail(where, "--steps and --set change a trainer's run config, and this job runs its own command",
                        "pass the program's own flags in the job definition instead")
        return
    config_path = PurePosixPath(args[args.index("--config") + 1])
    mount = next((m for m in container.get("volumeMounts", []) if config_path.parent == PurePosixPath(m["mountPath"])),
                 None)
    volume = next((v for v in template["spec"].get("volumes", []) if mount and v["name"] == mount["name"]), {})
    config_map = job_file.parent / f"ConfigMap.{volume.get('configMap', {}).get('name')}.yaml"
    if not config_map.is_file():
        raise _fail(where, f"the run config {config_path} comes from no ConfigMap in {job_file.parent}",
                    "run `kubetrain synth` so dist/ holds the job's ConfigMap")
    text = ((_read_yaml(config_map, where) or {}).get("data") or {}).get(config_path.name, "")
    sets = [*overrides, *([f"max_steps={steps}"] if steps is not None else [])]
    with tempfile.TemporaryDirectory() as scratch:  # the loader reads files; this one is ours and goes away
        (Path(scratch) / config_path.name).write_text(text)
        load_run_config(Path(scratch) / config_path.name, sets, where=f"{where} (run config with --set)")


def _launcher_shims(workdir: Path) -> Path:
    """`python` and `torchrun` on the PATH of the pods: this interpreter, as the image's would be."""
    bin_dir = (workdir / "bin").resolve()
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, body in (("python", f'exec "{sys.executable}" "$@"\n'),
                       ("torchrun", f'exec "{sys.executable}" -m torch.distributed.run "$@"\n')):
        shim = bin_dir / name
        shim.write_text(f"#!/bin/sh\n{body}")
        shim.chmod(shim.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return bin_dir


def _check_resources(container: dict[str, Any], where: str) -> None:
    limits = container.get("resources", {}).get("limits") or {}
    for resource in (GPU_RESOURCE, NEURON_RESOURCE):
        wanted = int(limits.get(resource, 0))
        if wanted and (resource != GPU_RESOURCE or shutil.which("nvidia-smi") is None):
            raise _fail(where, f"each pod requests {wanted} {resource} and this machine has none",
                        "run-local runs CPU jobs (like dev's); run accelerator jobs in the cluster")
    if importlib.util.find_spec("torch") is None:
        raise _fail(where, "torch is not installed, so neither torchrun nor the trainer can start",
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
            for key, text in ((_read_yaml(config_map, where) or {}).get("data") or {}).items():
                (local / key).write_text(text)
        elif "emptyDir" in volume or "secret" in volume:
            local = pod_dir / mount["name"]  # a Secret's files are the user's to put there
        else:
            raise _fail(where, f"volume {mount['name']} is of a kind run-local cannot map",
                        "use PersistentVolumeClaim, ConfigMap, Secret or emptyDir volumes")
        local.mkdir(parents=True, exist_ok=True)
        mounts[mount["mountPath"]] = local.resolve()
    return mounts


def _config_overrides(command: list[str], mounts: dict[str, Path], steps: int | None, overrides: list[str],
                      where: str) -> list[str]:
    """For trainer jobs, `--set` arguments: the user's overrides (already checked), then the run config's
    paths mapped to local folders."""
    if "--config" not in command:
        return []
    sets = [*overrides, *([f"max_steps={steps}"] if steps is not None else [])]
    run = load_run_config(Path(command[command.index("--config") + 1]), sets, where=where)
    sets.append(f"checkpoint.dir={_map_path(run.checkpoint.dir, mounts)}")
    if run.checkpoint.local_dir:
        sets.append(f"checkpoint.local_dir={_map_path(run.checkpoint.local_dir, mounts)}")
    paths = {"data.path": run.data.path, "data.tokenizer": run.data.tokenizer}
    if run.model.kind == "hf":  # a Hugging Face model's files, and where its weights are exported
        paths |= {f"model.{name}": getattr(run.model, name) for name in ("config_path", "pretrained_path", "export_dir")}
    sets += [f"{key}={_map_path(value, mounts)}" for key, value in paths.items() if value]
    if run.metrics.port:  # pods share this machine's ports: each gets its own
        sets.append(f"metrics.port={free_port()}")
    # The launcher's `--check` reads the config file alone, without the --set arguments: the pod's copy (written
    # by run-local) holds the local paths too, so the check looks where the ranks will.
    config = Path(command[command.index("--config") + 1])
    config.write_text(load_run_config(config, sets, where=where).to_yaml(), encoding="utf-8")
    return [arg for value in sets for arg in ("--set", value)]
