"""The CPU a process that imported torch spends leaving the interpreter, with and without
kubetrain_runtime/interpreter_exit.py's freeze_at_exit (what every rank, warm process and torchrun wrapper of kubetrain
registers).

    python bench/interpreter_exit.py [--rounds 7]

Each round starts two fresh interpreters, one of each kind, alternating which goes first. Each imports torch and
dynamo (what a rank imports: DDP's and AdamW's constructors import dynamo), prints the CPU it has used by then, and
exits; the parent reads the process's whole CPU time from wait4, so the exit's cost is the difference. Prints the
median exit cost of each kind and their ratio (target <= 0.3: the exit costs less than a third of what it did), and the
median whole process's CPU of each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = """
import resource, sys
import torch, torch._dynamo
if sys.argv[1] == "frozen":
    from kubetrain_runtime.interpreter_exit import freeze_at_exit
    freeze_at_exit()
usage = resource.getrusage(resource.RUSAGE_SELF)
print(usage.ru_utime + usage.ru_stime)
"""


def measure(kind: str) -> tuple[float, float]:
    """(the exit's CPU seconds, the whole process's) of one interpreter of `kind`."""
    process = subprocess.Popen([sys.executable, "-c", PROGRAM, kind], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(ROOT)})
    printed = process.stdout.read()
    _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"the {kind} interpreter failed")
    whole = usage.ru_utime + usage.ru_stime
    return whole - float(printed), whole


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    found: dict[str, list[tuple[float, float]]] = {"plain": [], "frozen": []}
    for round_ in range(args.rounds):
        for kind in (("plain", "frozen") if round_ % 2 == 0 else ("frozen", "plain")):
            found[kind].append(measure(kind))
    exits = {kind: statistics.median(e for e, _ in rows) for kind, rows in found.items()}
    wholes = {kind: statistics.median(w for _, w in rows) for kind, rows in found.items()}
    ratio = exits["frozen"] / exits["plain"]
    print(f"exit CPU: plain {exits['plain']:.3f} s, frozen {exits['frozen']:.3f} s, ratio {ratio:.2f} "
          f"({'met' if ratio <= 0.3 else 'NOT MET'}: target <= 0.3)")
    print(f"whole process CPU: plain {wholes['plain']:.2f} s, frozen {wholes['frozen']:.2f} s "
          f"({args.rounds} rounds, medians)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
