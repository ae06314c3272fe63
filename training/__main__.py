"""`python -m training --config FILE [--set key=value ...]`: what every pod runs under torchrun.

Alone it trains with world size 1; under torchrun each rank reads RANK/WORLD_SIZE/LOCAL_RANK.
A bad config is reported (by rank 0) as one line per problem, and the process exits 2.
"""

from __future__ import annotations

import argparse
import os
import sys

from training.config import load_run_config
from training.faults import parse_faults
from training.problems import ConfigError, Problem
from training.tokens import open_token_file

EXIT_BAD_CONFIG = 2


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m training", description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True, help="run config YAML (the job's mounted ConfigMap)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config field, e.g. --set max_steps=30 (repeatable)")
    parser.add_argument("--check", action="store_true",
                        help="only validate the config and exit (0: valid, 2: not); the pod's launcher runs this "
                             "before torchrun, so a bad config fails the job at once instead of being retried")
    parser.add_argument("--stop-after-step", type=int, default=None, metavar="N",
                        help="stop after step N as if interrupted (drills and resume tests); "
                             "the schedule still runs to max_steps")
    return parser.parse_args(argv)


def report(error: ConfigError) -> int:
    if os.environ.get("RANK", "0") == "0":  # one copy of the report, not one per rank
        for line in error.lines():
            print(f"error: {line}", file=sys.stderr)
    return EXIT_BAD_CONFIG


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        run = load_run_config(args.config, args.overrides)
    except ConfigError as error:
        return report(error)
    if run.data.source == "tokens":  # the data volume is mounted where the launcher checks, too
        try:
            open_token_file(run.data, run.model.vocab_size)
        except ConfigError as error:
            return report(error)
    if args.check:
        return 0
    try:
        parse_faults(os.environ.get("KUBETRAIN_FAULT", ""))
    except ValueError as exc:
        return report(ConfigError("KUBETRAIN_FAULT", [Problem("KT006", "", str(exc), "fix or unset KUBETRAIN_FAULT")]))
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    problems = run.check_world_size(world_size)
    if problems:
        return report(ConfigError(args.config, problems))

    # torch is imported only once the config is known to be good: bad input fails fast.
    from training.distributed import init_world, shutdown
    from training.trainer import Trainer

    world = init_world(run.resilience.collective_timeout_s)
    trainer = None
    try:
        trainer = Trainer(run, world)
        trainer.train(stop_after_step=args.stop_after_step)
    finally:
        if trainer is not None:
            trainer.close()
        del trainer
        shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
