"""The cost of every job's run, from the objects of dist/ alone.

For a run object (PyTorchJob, TrainJob, ...) with a `kubetrain.dev/job` label:
  - the work: tokens = max_steps x batch.global_size x data.seq_len of its run config (the ConfigMap its pods
    mount), FLOPs = tokens x training/flops.py's FLOPs per token; or a command job's declared Estimate;
  - the nodes: its pods (an elastic job's min to max), with their accelerators;
  - the node: its pool's NodePool (instance types, capacity type, zone, pricing annotation), or the instance
    type its pods select;
  - hours = FLOPs / (accelerators x peak FLOP/s x MFU x ETTR) / 3600; GPU-hours = hours x accelerators;
    dollars = hours x nodes x the node's hourly price. A pool's reserved nodes are paid whether a job runs
    or not: that share of the dollars is sunk, the rest marginal.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kubetrain.cost.annotations import CostInputError, estimate_of, peak_flops_of, pricing_of
from kubetrain.cost.cost_props import Estimate, PoolPricing
from kubetrain.cost.prices import NodePrice, node_price, price_table, region_of, unpriced_reason
from kubetrain.kinds.base import RunShape
from kubetrain.kinds.kind_registry import group_kind, run_kind, shape_of
from kubetrain.kinds.kubernetes import RUN_CONFIG_FIX, read_config_map_run
from kubetrain.model.instances import BUILTIN_CATALOG
from kubetrain.model.memory_annotation import read_annotation
from kubetrain.model.vocabulary import INSTANCE_TYPE_LABEL, JOB_LABEL, NODEPOOL_LABEL, RUN_CONFIG_ENV, RUN_CONFIG_FILE
from training.config import RunConfig
from training.flops import attention_flops_per_token, flops_per_token, parameter_count

ZONE_LABEL = "topology.kubernetes.io/zone"
ZONE_ID_LABEL = "topology.k8s.aws/zone-id"  # Karpenter's well-known label: the zone's ID, the same in every account


@dataclass(frozen=True)
class Work:
    """What a run trains: tokens, and the FLOPs they take."""

    tokens: float
    flops: float


def trainer_work(run: RunConfig) -> Work:
    tokens = run.max_steps * run.batch.global_size * run.data.seq_len
    return Work(tokens, float(tokens * flops_per_token(run.model, run.data.seq_len)))


def command_work(estimate: Estimate) -> Work | None:
    tokens = estimate.work_tokens
    if tokens is None:
        return None
    if estimate.model is not None:
        seq_len = estimate.seq_len or 0
        n = parameter_count(estimate.model) - estimate.model.vocab_size * estimate.model.dim
        per_token = 6 * n + attention_flops_per_token(estimate.model.n_layers, estimate.model.dim, seq_len)
    else:
        per_token = 6 * (estimate.parameters or 0)
    return Work(tokens, tokens * per_token)


@dataclass(frozen=True)
class Pool:
    cluster: str
    name: str
    instance_types: list[str]
    capacity_type: str
    zones: list[str]
    pricing: PoolPricing | None
    zone_ids: list[str] = field(default_factory=list)

    @property
    def reserved_nodes(self) -> int:
        return (self.pricing.reserved_nodes or 0) if self.pricing else 0


def read_pool(cluster: str, obj: dict[str, Any]) -> Pool:
    requirements = {r.get("key"): r.get("values") or [] for r in
                    ((((obj.get("spec") or {}).get("template") or {}).get("spec") or {}).get("requirements") or [])}
    capacity = requirements.get("karpenter.sh/capacity-type") or ["on-demand"]
    return Pool(cluster, (obj.get("metadata") or {}).get("name", ""), list(requirements.get(INSTANCE_TYPE_LABEL) or []),
                capacity[0], list(requirements.get(ZONE_LABEL) or []), pricing_of(obj),
                list(requirements.get(ZONE_ID_LABEL) or []))


@dataclass
class JobCost:
    cluster: str
    namespace: str
    job: str
    run: str  # the run object's name (create-once runs carry the definition's hash)
    shape: RunShape
    instance_type: str | None
    capacity_type: str | None
    price: NodePrice | None
    pool: Pool | None
    estimate: Estimate
    work: Work | None
    peak_flops: float | None
    notes: list[str] = field(default_factory=list)
    memory: dict[str, Any] | None = None  # one rank's memory estimate (kubetrain.jobs.memory_fit), when synth made one

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.cluster, self.namespace, self.job)

    @property
    def node_range(self) -> tuple[int, int]:
        return self.shape.elastic or (self.shape.pods, self.shape.pods)

    def hours(self, nodes: int) -> float | None:
        accelerators = nodes * self.shape.accelerators_per_pod
        if self.work is None or not self.peak_flops or not accelerators:
            return None
        return self.work.flops / (accelerators * self.peak_flops * self.estimate.mfu * self.estimate.ettr) / 3600

    @property
    def gpu_hours(self) -> float | None:
        """The same at every node count: the work over one accelerator's effective FLOP/s."""
        nodes = self.node_range[1]
        hours = self.hours(nodes)
        return None if hours is None else hours * nodes * self.shape.accelerators_per_pod

    @property
    def usd(self) -> float | None:
        nodes = self.node_range[1]
        hours = self.hours(nodes)
        return None if hours is None or self.price is None else hours * nodes * self.price.usd

    @property
    def sunk_usd(self) -> float | None:
        """The share of the dollars paid whether the job runs or not: its nodes inside the pool's reservation."""
        nodes = self.node_range[1]
        hours, reserved = self.hours(nodes), self.pool.reserved_nodes if self.pool else 0
        if hours is None or self.price is None:
            return None
        return hours * min(nodes, reserved) * self.price.usd

    @property
    def marginal_usd(self) -> float | None:
        usd, sunk = self.usd, self.sunk_usd
        return None if usd is None or sunk is None else usd - sunk

    def row(self) -> dict[str, Any]:
        """`kubetrain cost --json`: one object per job, at the node count it starts with (an elastic job's GPU-hours
        and dollars are the same at every size in its range; the text table shows the range of hours)."""
        nodes = self.shape.pods
        row: dict[str, Any] = {
            "cluster": self.cluster, "namespace": self.namespace, "job": self.job,
            "instance_type": self.instance_type, "capacity_type": self.capacity_type, "nodes": nodes,
            "gpus": nodes * self.shape.accelerators_per_pod, "price_per_node_hour": self.price.usd if self.price else None,
            "memory": self.memory}
        if self.work is not None:
            row |= {"tokens": self.work.tokens, "flops": self.work.flops, "peak_flops_per_gpu": self.peak_flops,
                    "mfu": self.estimate.mfu, "ettr": self.estimate.ettr, "hours": self.hours(nodes),
                    "gpu_hours": self.gpu_hours, "usd": self.usd}
        return row


class _Dist:
    """The objects of one revision of dist/, indexed the way run objects refer to them."""

    def __init__(self, objects: Iterable[tuple[str, dict[str, Any]]]):
        self.runs: list[tuple[str, dict[str, Any]]] = []
        self.pools: dict[tuple[str, str], Pool] = {}
        self.named: dict[tuple[str, str, str, str], dict[str, Any]] = {}  # (cluster, ns, kind, name)
        for cluster, obj in objects:
            group, kind = group_kind(obj)
            meta = obj.get("metadata") or {}
            if run_kind(obj) is not None and (meta.get("labels") or {}).get(JOB_LABEL):
                self.runs.append((cluster, obj))
            elif (group, kind) == ("karpenter.sh", "NodePool"):
                self.pools[(cluster, meta.get("name", ""))] = read_pool(cluster, obj)
            else:  # what runs read: the ConfigMaps their pods mount, a TrainJob's runtime
                self.named[(cluster, meta.get("namespace", ""), kind, meta.get("name", ""))] = obj

    def run_config(self, cluster: str, namespace: str, pod_spec: dict[str, Any]) -> RunConfig | None:
        """The run config among the ConfigMaps the pods mount (the trainer's run.yaml), read as the pod reads it;
        None for a job that runs no trainer. A trainer job's (its pods name RUN_CONFIG_ENV) that is missing or
        that the pod would refuse is bad input: its cost would be a guess."""
        mounted = [name for volume in pod_spec.get("volumes") or []
                   if (name := (volume.get("configMap") or {}).get("name"))]
        for name in mounted:
            config_map = self.named.get((cluster, namespace, "ConfigMap", name)) or {}
            run, problems = read_config_map_run(config_map)
            if problems:
                found = "; ".join(f"{p.path}: {p.message} [{p.code}]" for p in problems)
                raise CostInputError(f"{cluster}/{namespace}: ConfigMap {name}: {found}; fix: "
                                     f"{problems[0].fix if len(problems) == 1 else RUN_CONFIG_FIX}")
            if run is not None:
                return run
        containers = pod_spec.get("containers") or [{}]
        if any(env.get("name") == RUN_CONFIG_ENV for env in containers[0].get("env") or [] if isinstance(env, dict)):
            raise CostInputError(f"{cluster}/{namespace}: the pods read a run config ({RUN_CONFIG_ENV}), and no "
                                 f"ConfigMap they mount ({', '.join(mounted) or 'none'}) holds one as "
                                 f"{RUN_CONFIG_FILE}; fix: {RUN_CONFIG_FIX}")
        return None

    def job_cost(self, cluster: str, obj: dict[str, Any]) -> JobCost:
        meta = obj["metadata"]
        namespace = meta.get("namespace", "")
        shape = shape_of(obj, lambda kind, name: self.named.get((cluster, namespace, kind, name))
                         or self.named.get((cluster, "", kind, name)))
        pod_spec = shape.pod_specs[0] if shape.pod_specs else {}
        selector = pod_spec.get("nodeSelector") or {}
        pool = self.pools.get((cluster, selector.get(NODEPOOL_LABEL, "")))
        notes: list[str] = []
        if pool is not None:
            zones = [selector[ZONE_LABEL]] if ZONE_LABEL in selector else pool.zones
            zone_ids = [selector[ZONE_ID_LABEL]] if ZONE_ID_LABEL in selector else pool.zone_ids
            regions = {region for zone in zones if (region := region_of(zone))} | \
                {region for zone in zone_ids if (region := price_table().region_of_zone_id(zone))}
            region = regions.pop() if len(regions) == 1 else None
            price = node_price(pool.instance_types, region, pool.capacity_type, pool.pricing, zone_ids) \
                if pool.instance_types else None
            instance_type = price.instance_type if price else (pool.instance_types or [None])[0]
            capacity_type: str | None = pool.capacity_type
            if price is None:
                reason = unpriced_reason(pool.instance_types, region, pool.capacity_type, pool.pricing)
                notes.append(f"no price for {instance_type} ({pool.capacity_type}"
                             f"{', ' + region if region else ', region unknown'})"
                             f"{': ' + reason if reason else ''}: give the pool pricing=")
        else:
            instance_type, capacity_type, price = selector.get(INSTANCE_TYPE_LABEL), None, None
            if instance_type:
                notes.append("no pool: capacity type and region unknown, so no price")
        run = self.run_config(cluster, namespace, pod_spec)
        estimate = estimate_of(obj) or Estimate()
        work = trainer_work(run) if run is not None else command_work(estimate)
        catalog = BUILTIN_CATALOG.get(instance_type) if instance_type else None
        peak = peak_flops_of(obj) or (catalog.peak_bf16_flops if catalog else None)
        if work is not None and shape.accelerators and not peak:
            notes.append(f"no known bf16 peak for {instance_type}'s accelerators: no hours")
        elif work is not None and not shape.accelerators:
            notes.append("no accelerators: a CPU has no peak FLOP/s to estimate hours from")
        return JobCost(cluster, namespace, meta["labels"][JOB_LABEL], meta.get("name", ""), shape, instance_type,
                       capacity_type, price, pool, estimate, work, peak, notes, read_annotation(obj))


def fleet_costs(objects: Iterable[tuple[str, dict[str, Any]]]) -> list[JobCost]:
    """Every job's cost in one revision of dist/ (objects as (cluster folder, manifest)), by job."""
    dist = _Dist(objects)
    return sorted((dist.job_cost(cluster, obj) for cluster, obj in dist.runs), key=lambda c: (c.key, c.run))


def pools(objects: Iterable[tuple[str, dict[str, Any]]]) -> list[Pool]:
    return sorted(_Dist(objects).pools.values(), key=lambda p: (p.cluster, p.name))
