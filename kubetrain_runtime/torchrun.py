"""`python -m kubetrain_runtime.torchrun [torchrun's arguments]`: torchrun, ending as a container stopped by a signal.

torch's agent answers a stop signal (its `--signals-to-handle`: SIGTERM, SIGINT, SIGHUP, SIGQUIT) by passing it on to
its ranks, waiting up to TORCH_ELASTIC_SHUTDOWN_TIMEOUT for them, and raising `SignalException` out of its `main`
(torch/distributed/elastic/agent/server/api.py re-raises it, torch/distributed/launcher/api.py too): plain torchrun
ends with that traceback and exit 1, after its ranks on kubetrain_runtime saved the step they agreed on and exited
128 + the signal. No flag or variable of torchrun's changes that (leaving SIGTERM out of `--signals-to-handle` kills
the agent without telling its ranks). This is torchrun, its own `main` with the same arguments, with that one end
changed: a stop signal ends it with one line and 128 + the signal, the code of a container stopped by it, which
every target restarts (kubetrain_runtime/failures.py). Every other end (success, a rank that failed past the
restart budget) is torchrun's own.
"""

from __future__ import annotations

import signal
import sys

from kubetrain_runtime import warm
from kubetrain_runtime.failures import stopped_exit
from kubetrain_runtime.interpreter_exit import freeze_at_exit


def main(argv: list[str] | None = None) -> int:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.run import main as torchrun

    argv = sys.argv[1:] if argv is None else argv
    freeze_at_exit()
    warm.start_from_agent(argv)
    try:
        torchrun(argv)
    except SignalException as stop:
        code = stopped_exit(stop.sigval)
        print(f"kubetrain: torchrun stopped by {signal.Signals(stop.sigval).name} (its ranks were told first: a run on "
              f"kubetrain_runtime saves the step they agree on); exiting {code}", file=sys.stderr, flush=True)
        return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
