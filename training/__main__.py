"""`python -m training --config FILE [--set key=value ...]`: what every pod runs under torchrun.

Alone it trains with world size 1; under torchrun each rank reads RANK/WORLD_SIZE/LOCAL_RANK, and (on
Linux) runs as a fork of the pod's warm process (kubetrain_runtime/warm.py), which has imported torch and the trainer
already (`preloads`, and `rehearse`).
How it ends (kubetrain_runtime/failures.py): 0 when the run is done; a bad config, data set or fault spec is
reported (by rank 0) as one line per problem, exit 2; unusable checkpoint storage exits 3 and a run that
keeps diverging 4, each with one line naming the cause and the fix; a stop signal ends it with a
checkpoint and exit 128 + the signal; anything else is a fault, with its traceback, to be retried.
This module imports only the standard library at the top: a rank that the warm process runs starts fast.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from kubetrain_runtime import failures, warm

# What a rank of a Hugging Face model imports besides the trainer: transformers (its models' and tokenizers' auto
# classes), ~1.6 s of CPU that the rank would otherwise pay after every restart.
HF_PRELOADED = ("transformers", "transformers.models.auto.modeling_auto", "transformers.models.auto.tokenization_auto")


def parse_args(argv: list[str] | None):
    import argparse

    parser = argparse.ArgumentParser(prog="python -m training", description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="run config YAML (the job's mounted ConfigMap)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config field, e.g. --set max_steps=30 (repeatable)")
    parser.add_argument("--check", action="store_true",
                        help="only validate the config and exit (0: valid, 2: not); the pod's launcher runs this "
                             "before torchrun, so a bad config fails the job at once instead of being retried")
    parser.add_argument("--export", action="store_true",
                        help="a Hugging Face model (model.kind: hf): save the newest checkpoint's weights in "
                             "save_pretrained layout to model.export_dir/step-N, and exit without training")
    parser.add_argument("--stop-after-step", type=int, default=None, metavar="N",
                        help="stop after step N as if interrupted (drills and resume tests); "
                             "the schedule still runs to max_steps")
    return parser.parse_args(argv)


def report(error, record: bool = True, metrics=None) -> int:
    """A ConfigError: every line by rank 0 (one copy, not one per rank), the note for the launcher, and the failure
    on an endpoint of this rank's own (or of the launcher's check: the pod's first port) for the failed-run alert,
    since its run's endpoint never opened: `metrics`, the run config's, else the defaults."""
    code = failures.bad_input(error.lines(), record_note=record)
    announce(code, metrics)
    return code


def announce(code: int, metrics=None, world=None) -> None:
    """A failure for good before the run's endpoint opened, served where Prometheus scrapes it; torch (which the
    endpoint's module imports) only where it lingers: in a pod, not for a bad input met on a laptop."""
    from kubetrain_runtime.runtime_config import MetricsConfig

    metrics = metrics or MetricsConfig()
    if metrics.port and metrics.linger_s():
        from kubetrain_runtime.telemetry import announce_failure

        announce_failure(metrics, failures.REASONS[code], world)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    earlier = failures.recorded()
    if earlier is not None:
        return earlier  # a rank of this container failed for good: spend torchrun's restarts at once
    if warm.wanted() and runs_warm(argv):
        code = warm.run_in_warm_process(argv, "training.__main__")
        if code is not None:
            return code
    return run(argv)


def runs_warm(argv: list[str]) -> bool:
    """Whether a rank with these arguments runs in the pod's warm process: any but a `--check`, which trains nothing."""
    return "--check" not in argv


def run(argv: list[str]) -> int:
    """Check the inputs, then train in this process; returns the exit code, or exits at once on a failure."""
    started = time.time()
    from kubetrain_runtime.faults import parse_faults
    from kubetrain_runtime.problems import ConfigError, Problem
    from training.config import DATASET_SOURCES, load_run_config
    from training.hf_model import check_model, offline
    from training.tokens import open_token_file

    offline()  # nothing is downloaded from a model hub, whatever the image's environment says
    args = parse_args(argv)
    run_config = None
    try:
        run_config = load_run_config(args.config, args.overrides)
        # The volumes are mounted where the launcher checks, too: a missing path fails the job before torchrun.
        if args.export and run_config.model.kind != "hf":
            raise ConfigError(args.config, [Problem("KT232", "model.kind", "--export saves a Hugging Face model's "
                                                    "weights, and model.kind is gpt", "drop --export")])
        if run_config.model.kind == "hf":
            problems = check_model(run_config.model, run_config.data.seq_len)
            if problems:
                raise ConfigError(args.config, problems)
        if run_config.data.source == "tokens":
            open_token_file(run_config.data, run_config.model.vocab_size)
        elif run_config.data.source in DATASET_SOURCES:
            from training.documents import check_data

            check_data(run_config.data, run_config.model.vocab_size)
        if run_config.model.kind == "hf" and run_config.data.tokenizer:
            from training.hf_export import check_tokenizer
            from training.hf_model import model_config

            problems = check_tokenizer(run_config, model_config(run_config.model))
            if problems:
                raise ConfigError(args.config, problems)
    except ConfigError as error:
        return report(error, record=not args.check, metrics=run_config.metrics if run_config else None)
    if args.check:
        return 0
    try:
        parse_faults(os.environ.get("KUBETRAIN_FAULT", ""))
    except ValueError as exc:
        return report(ConfigError("KUBETRAIN_FAULT", [Problem("KT006", "", str(exc), "fix or unset KUBETRAIN_FAULT")]),
                      metrics=run_config.metrics)
    problems = run_config.check_world_size(int(os.environ.get("WORLD_SIZE", 1)))
    if problems:  # an elastic job resized to a world size its batch does not divide
        return report(ConfigError(args.config, problems), metrics=run_config.metrics)

    # torch is imported only once the config is known to be good: bad input fails fast.
    from kubetrain_runtime.distributed import init_world, shutdown
    from kubetrain_runtime.dumps import Dumps
    from kubetrain_runtime.preemption import StopRequest
    from kubetrain_runtime.runtime_config import JOB_ENV
    from training.trainer import Trainer

    stop = StopRequest(int(os.environ.get("RANK", 0))).install()
    # When each part of the start was done (epoch seconds): a resumed run reports them, recovery's anatomy.
    startup = {"client": float(os.environ.get(warm.STARTED_ENV, started)), "rank": started}
    trainer = world = None
    try:
        # The flight recorder's settings and the rank's dump folder, on the checkpoint volume, before the group.
        dumps = Dumps(Path(run_config.checkpoint.dir), os.environ.get(JOB_ENV, "local"),
                      int(os.environ.get("RANK", 0)))
        world = init_world(run_config.resilience.collective_timeout_s, dumps)
        startup["process_group"] = time.time()
        trainer = Trainer(run_config, world, stop, startup)
        if args.export:
            trainer.runtime.restore()
            trainer.export()
            trainer.close()
            shutdown()
            return 0
        ended = trainer.train(stop_after_step=args.stop_after_step)
        trainer.close()
        shutdown()
    except failures.PermanentFailure as failure:
        failures.record(failure.exit_code, failure.line)
        fail_for_good(failure.exit_code, trainer, run_config.metrics, world)
        exit_now(failure.exit_code, trainer)
    except ConfigError as error:  # the data and the model's files, read again by every rank
        code = failures.bad_input(error.lines())
        fail_for_good(code, trainer, run_config.metrics, world)
        exit_now(code, trainer)
    except BaseException:  # a fault: its traceback, and a retry by torchrun
        import traceback

        traceback.print_exc()
        exit_now(1, trainer)
    if ended["event"] == "stopped":
        return failures.stopped_exit(stop.signum or failures.STOP_SIGNALS[0])
    return 0


def preloads(argv: list[str]) -> tuple[str, ...]:
    """What the warm process imports for a rank with these arguments: the trainer, and transformers when the run
    config (with its --set) names a Hugging Face model. Arguments or a config that do not load preload the trainer
    alone: the rank says what is wrong with them."""
    import contextlib
    import io

    try:
        with contextlib.redirect_stderr(io.StringIO()):
            from training.config import load_run_config

            args = parse_args(argv)
            hf = load_run_config(args.config, args.overrides).model.kind == "hf"
    except (Exception, SystemExit):  # noqa: BLE001 - only a guess at what to import: the rank checks for itself
        hf = False
    return ("training.trainer", *(HF_PRELOADED if hf else ()))


def rehearse() -> None:
    """The warm process's rehearsal of a rank's first steps, on a tiny GPT (kubetrain_runtime/warm.py)."""
    import torch
    import torch.nn.functional as F

    from training.config import ModelConfig, OptimizerConfig
    from training.model import GPT
    from training.optimizer import build_optimizer

    model = GPT(ModelConfig(vocab_size=64, dim=16, n_layers=1, n_heads=2))
    optimizer = build_optimizer(model, OptimizerConfig())
    tokens = torch.zeros((1, 8), dtype=torch.long)
    F.cross_entropy(model(tokens).flatten(0, 1), tokens.flatten()).backward()
    warm.rehearse(model, optimizer)


def fail_for_good(code: int, trainer, metrics, world) -> None:
    """The failure on the run's endpoint once the trainer has one, else (unusable storage at start, a bad data file)
    on one of the rank's own."""
    if trainer is not None:
        trainer.runtime.failed(code)
    else:
        announce(code, metrics, world)


def exit_now(code: int, trainer) -> None:
    """End a failed rank without waiting for anything: a background save or a collective may wait on a
    peer that is gone, and the interpreter's exit would join their threads."""
    if trainer is not None:
        try:
            trainer.close(wait=False)
        except Exception:  # noqa: BLE001 - the rank is failing already; its first error is the one reported
            pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
