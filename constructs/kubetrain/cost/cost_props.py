"""What a platform engineer declares about cost: a pool's own price terms and a job's estimate.

    EfaNodePool(cluster, "p5", ..., capacity_type="reserved", capacity_reservation_ids=["cr-..."],
                pricing=PoolPricing(rate="capacity-block", reserved_nodes=16))
    TrainingJob(cluster, "gpt", ..., estimate=Estimate(mfu=0.42))               # a trainer job: its run config
    TrainingJob(cluster, "megatron", ..., estimate=Estimate(parameters=1.2e9, steps=20_000, global_batch=512,
                                                            seq_len=2048))      # a command job: what it trains

Both are written onto the emitted objects (kubetrain.cost.annotations), so `kubetrain cost` and `kubetrain
diff` price dist/ alone, any revision of it, the same way.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from kubetrain.model.strict import StrictProps
from kubetrain.rules.registry import register
from kubetrain_runtime.problems import rule_violation
from training.config import ModelConfig

# Assumptions of every estimate unless a job says otherwise (Estimate.mfu / .ettr).
# MFU: torchtitan's H100 benchmark (pytorch/torchtitan, benchmarks/llama3_h100_202412_torchtitan.md): Llama 3.1
# 8B, FSDP on 8 or 128 H100s, bf16, "achieves 33% to 39% MFU" without and with torch.compile.
DEFAULT_MFU = 0.35
# ETTR: Meta's Llama 3 pre-training, 16k H100s over 54 days with 466 interruptions, "achieved higher than 90%
# effective training time" (Llama Team, "The Llama 3 Herd of Models", arXiv:2407.21783, section 3.3.4).
DEFAULT_ETTR = 0.90

ESTIMATE_INVALID = register(
    "KT470", "error", "cost estimate that contradicts or misses what the job trains",
    rationale="A command job's cost comes from what it declares it trains: the model size and the tokens (or "
              "steps x global batch x sequence length). A trainer job's comes from its run config, which an "
              "estimate must not contradict. A partial or double declaration would price a run that is not the "
              "one that runs.",
    fix="on a command job give parameters (or model) and tokens (or steps, global_batch and seq_len); on a "
        "trainer job give only mfu and ettr",
    source="constructs/kubetrain/cost/cost_props.py; README.md (What a run costs)")
POOL_PRICING_INVALID = register(
    "KT472", "error", "pool price terms that contradict the pool's capacity type",
    rationale="A pool's own rate replaces the price table, a discount applies to the table's price, and a "
              "reservation's rate (on-demand for a capacity reservation, capacity-block for a Capacity Block) "
              "exists only on capacity_type 'reserved'; combining them, or a reservation on spot capacity, "
              "prices nodes at a rate nobody pays.",
    fix="give either usd_per_node_hour or discount; give rate only with capacity_type 'reserved'",
    source="https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-reservations.html; "
           "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-capacity-blocks.html")


class PoolPricing(StrictProps):
    """A pool's own price terms; without them its nodes cost the price table's rate for their capacity type
    (kubetrain/cost/prices.json)."""

    usd_per_node_hour: float | None = Field(None, gt=0, description="A negotiated rate for one node an hour: "
                                                                    "replaces the price table.")
    discount: float = Field(0.0, ge=0, lt=1, description="Share off the table's price (an enterprise or private "
                                                         "pricing discount), e.g. 0.3.")
    rate: Literal["on-demand", "capacity-block"] | None = Field(
        None, description="Reserved pools only: what the reservation bills. Default on-demand (an On-Demand "
                          "Capacity Reservation bills the on-demand rate); capacity-block for a Capacity Block.")
    reserved_nodes: int | None = Field(None, ge=0, description="Nodes paid for whether used or not (the "
                                                               "reservation's instance count). Default: max_nodes "
                                                               "on a reserved pool, static_nodes on a static "
                                                               "pool, else none.")

    @model_validator(mode="after")
    def _one_price(self) -> PoolPricing:
        if self.usd_per_node_hour is not None and self.discount:
            raise rule_violation(POOL_PRICING_INVALID.code, "usd_per_node_hour and discount both set the price",
                                 POOL_PRICING_INVALID.fix, field="discount")
        return self


class Estimate(StrictProps):
    """How long and how much a job's run takes. MFU and ETTR are assumptions (defaults cited in
    kubetrain/cost/cost_props.py); a command job also declares what it trains, a trainer job's run config says it."""

    mfu: float = Field(DEFAULT_MFU, gt=0, le=1, description="Model FLOPs utilization the run reaches "
                                                            "(torchtitan, Llama 3.1 8B on H100: 33-39 %).")
    ettr: float = Field(DEFAULT_ETTR, gt=0, le=1, description="Effective training time ratio: productive time "
                                                              "over wall time (Llama 3: > 90 %).")
    parameters: float | None = Field(None, gt=0, description="Command jobs: the model's parameters without the "
                                                             "input embedding (N of 6 N FLOPs per token).")
    model: ModelConfig | None = Field(None, description="Command jobs: the model's shape instead of parameters "
                                                        "(a GPT as training/model.py builds it); adds attention.")
    tokens: float | None = Field(None, gt=0, description="Command jobs: tokens trained on.")
    steps: int | None = Field(None, gt=0, description="Command jobs: optimizer steps (with global_batch, seq_len).")
    global_batch: int | None = Field(None, gt=0, description="Command jobs: sequences per step.")
    seq_len: int | None = Field(None, gt=0, description="Command jobs: tokens per sequence.")

    @property
    def declares_work(self) -> bool:
        return any(v is not None for v in (self.parameters, self.model, self.tokens, self.steps, self.global_batch,
                                           self.seq_len))

    @model_validator(mode="after")
    def _work_complete(self) -> Estimate:
        if not self.declares_work:
            return self
        size = [name for name in ("parameters", "model") if getattr(self, name) is not None]
        shape = [name for name in ("steps", "global_batch", "seq_len") if getattr(self, name) is not None]
        problem = None
        if len(size) != 1:
            problem = ("parameters", "give the model's size once: parameters or model" if size else
                       "the work is declared but not the model's size: give parameters or model")
        elif self.tokens is not None and len(shape) == 3:
            problem = ("tokens", "tokens and steps x global_batch x seq_len both say how much is trained")
        elif self.tokens is None and len(shape) != 3:
            missing = [name for name in ("steps", "global_batch", "seq_len") if name not in shape]
            problem = (missing[0], f"the tokens trained on are not declared: give tokens, or {', '.join(missing)}")
        if problem:
            raise rule_violation(ESTIMATE_INVALID.code, problem[1], ESTIMATE_INVALID.fix, field=problem[0])
        return self

    @property
    def work_tokens(self) -> float | None:
        if self.tokens is not None:
            return self.tokens
        if self.steps and self.global_batch and self.seq_len:
            return float(self.steps * self.global_batch * self.seq_len)
        return None
