"""The block writer against PyYAML itself, for the run config's Dumper (PyYAML's own, width 80, aliases)."""

from __future__ import annotations

import random

import yaml
from test_output_emit import NUMBERS, SCALARS

from training.config import RunConfig
from training.yaml_text import BlockWriter

DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
WRITER = BlockWriter(DUMPER)


def pyyaml(obj: object) -> str:
    return yaml.dump(obj, Dumper=DUMPER, sort_keys=False)


def test_the_run_config_is_written_as_pyyaml_writes_it():
    run = RunConfig.model_validate({"model": {"vocab_size": 512, "dim": 64, "n_layers": 2, "n_heads": 4},
                                    "batch": {"global_size": 16, "micro_size": 4}, "max_steps": 100,
                                    "checkpoint": {"dir": "/a/path/" + "long-" * 20}, "metrics": {"mlflow_experiment": "a b"}})
    assert run.to_yaml() == pyyaml(run.model_dump(mode="json"))


def test_random_documents_at_width_80_with_shared_objects():
    rng = random.Random(5)
    shared_list, shared_dict = [1, 2], {"a": 1}
    leaves = [*SCALARS, *NUMBERS, "a b " * 30, "word-" * 30, "x: y " * 5, shared_list, shared_dict, {}, []]

    def value(depth: int) -> object:
        roll = rng.random()
        if depth > 3 or roll < 0.45:
            return rng.choice(leaves)
        if roll < 0.75:
            return {str(rng.choice(leaves)): value(depth + 1) for _ in range(rng.randint(1, 4))}
        return [value(depth + 1) for _ in range(rng.randint(1, 4))]

    for _ in range(2_000):
        obj = {f"f{i}": value(0) for i in range(rng.randint(1, 4))}
        assert WRITER.dump(obj) == pyyaml(obj), obj
