"""How a pod starts its ranks: torchrun, wrapped so the operator's restart policy can tell faults from bad input.

torchrun restarts a pod's ranks up to `max_restarts` times, then exits 1, whatever killed them.
Under `restartPolicy: ExitCode` an exit of 1-127 fails the job for good and 128-255 restarts the
pod, so a bare torchrun would end a job whose ranks kept crashing as if its config were bad. The
launcher script keeps the classes apart (kubetrain_runtime/failures.py):
- a bad run config (trainer jobs) is found before torchrun starts and exits 2: the job fails at once;
- a rank that fails for good (a full or read-only checkpoint volume, a run that keeps diverging, a
  config only the ranks can judge) leaves its exit code and one line in `KUBETRAIN_FAILURE_FILE`; the
  ranks torchrun restarts exit at once with it, and the launcher exits with it (2, 3 or 4) and prints
  the line, so the job fails instead of being retried;
- a stop signal (the pod deleted, preempted or drained) is passed on to torchrun, which passes it on to
  the ranks; they save a checkpoint and exit, and the launcher exits 128 + the signal: restart me (torchrun is
  `python -m kubetrain_runtime.torchrun` where the image has it, which ends so too instead of with torch's
  SignalException traceback and exit 1);
- ranks that keep failing otherwise, past torchrun's budget, exit `EXIT_RETRY`: the operator restarts
  the pod (a fresh node, perhaps) up to the job's `backoff_limit`.
The script stays in the foreground as the container's first process.

What a hung or failed rank leaves (its stacks, torch's flight recorder, a copy of its failure note) lands on the
checkpoint volume, named by job, attempt (this pod's start: KUBETRAIN_ATTEMPT), restart and rank
(kubetrain_runtime/dumps.py); the ranks list the folders in `KUBETRAIN_DUMPS_NOTE` and the launcher's last lines
name them. For a command or function that does not use the runtime, the launcher points the flight recorder at
`$KUBETRAIN_CHECKPOINT_DIR/hangs/<job>/<attempt>/` itself, when the job declares a checkpoint folder.

The stop's time: Kubernetes kills the pod `terminationGracePeriodSeconds` after its stop signal. A
trainer job derives that grace period from its expected save time (`grace_period_s`) unless the pod
settings give one, and torchrun's shutdown timeout (`TORCH_ELASTIC_SHUTDOWN_TIMEOUT`, read by torchrun
and by the ranks, which stop a margin before it) comes a few seconds before the kill.
"""

from __future__ import annotations

import math
import signal

from kubetrain.jobs.function import FUNCTION_FILE, INSTALL_SCRIPT
from kubetrain.jobs.nsys_profile import profiled_program
from kubetrain.jobs.spec import CONFIG_MOUNT, JobSpec
from kubetrain.model.vocabulary import DEFAULT_TERMINATION_GRACE_S, RUN_CONFIG_ENV, RUN_CONFIG_FILE
from kubetrain_runtime.dumps import (
    ATTEMPT_ENV,
    DUMPS_NOTE_ENV,
    FR_BUFFER_ENTRIES,
    FR_BUFFER_ENV,
    FR_FILE_ENV,
    FR_PREFIX,
    HANGS,
    POD_FR_FILE,
)
from kubetrain_runtime.failures import FAILURE_FILE_ENV, stopped_exit
from training.config import RunConfig
from training.flops import checkpoint_bytes

EXIT_RETRY = 200
CONFIG_PATH = f"{CONFIG_MOUNT}/{RUN_CONFIG_FILE}"
SHUTDOWN_TIMEOUT_ENV = "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"

# torchrun's agents otherwise hand their workers one TCPStore that outlives every restart: keys
# left by the attempt before (a dead peer's address) are read by the next one, and agents that
# restarted for different reasons (a failure, or a peer's re-rendezvous) disagree on the attempt
# number that could tell them apart. With sharing off, rank 0 of every attempt hosts a fresh store
# on a port its agent picks.
LAUNCH_ENV: dict[str, str] = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}

# The expected time of a checkpoint save, for the grace period: each node writes its share of the state at
# this rate (a pessimistic share of a shared file system's throughput), and the grace period is twice that
# plus the time to finish a step, agree, and stop, but never below Kubernetes' default.
WRITE_BYTES_PER_S_PER_NODE = 250e6
STOP_OVERHEAD_S = 15
SHUTDOWN_MARGIN_S = 5  # torchrun kills its ranks this long before Kubernetes kills the pod

# Whether the image's python has kubetrain_runtime's torchrun (and torch), found without importing torch: it then
# starts the ranks instead of `torchrun`, the same agent, which ends a stop signal with one line and 128 + the signal
# instead of torch's SignalException traceback (kubetrain_runtime/torchrun.py). A command job's image may have neither.
_HAS_RUNTIME_TORCHRUN = ("import importlib.util as u, sys; "
                         "sys.exit(not (u.find_spec('torch') and u.find_spec('kubetrain_runtime.torchrun')))")
# `$$` and `$(` are Kubernetes' variable syntax in a container's command: the script uses neither.
_RUN_TORCHRUN = f"""export {FAILURE_FILE_ENV}="${{TMPDIR:-/tmp}}/kubetrain-failure"
dumps=
export {DUMPS_NOTE_ENV}="${{TMPDIR:-/tmp}}/kubetrain-dumps"
rm -f "${FAILURE_FILE_ENV}" "${DUMPS_NOTE_ENV}"
export {ATTEMPT_ENV}="attempt-`date -u +%Y%m%dT%H%M%SZ`"
export {FR_BUFFER_ENV}="${{{FR_BUFFER_ENV}:-{FR_BUFFER_ENTRIES}}}"
if [ -n "$KUBETRAIN_CHECKPOINT_DIR" ]; then
  case "${FR_FILE_ENV}" in ""|{POD_FR_FILE})
    dumps="$KUBETRAIN_CHECKPOINT_DIR/{HANGS}/${{KUBETRAIN_JOB:-local}}/${ATTEMPT_ENV}"
    mkdir -p "$dumps" && echo "$dumps" >> "${DUMPS_NOTE_ENV}" && export {FR_FILE_ENV}="$dumps/{FR_PREFIX}";;
  esac
fi
if python -c "{_HAS_RUNTIME_TORCHRUN}" 2>/dev/null; then
  python -m kubetrain_runtime.torchrun "$@" &
else
  torchrun "$@" &
fi
pid=$!
stopped=0
trap 'stopped={stopped_exit(signal.SIGTERM)}; kill -TERM $pid 2>/dev/null' TERM
trap 'stopped={stopped_exit(signal.SIGINT)}; kill -INT $pid 2>/dev/null' INT
wait $pid; code=$?
while kill -0 $pid 2>/dev/null; do wait $pid; code=$?; done
[ -n "$dumps" ] && find "$dumps" -depth -type d -empty -delete 2>/dev/null
if [ -s "${DUMPS_NOTE_ENV}" ]; then
  sort -u "${DUMPS_NOTE_ENV}" | while read -r folder; do
    if ls -A "$folder" 2>/dev/null | grep -q .; then
      echo "kubetrain: the ranks left dumps (stacks, flight recorder, failure note) in $folder" >&2
    fi
  done
fi
[ $code -eq 0 ] && exit 0
if [ -s "${FAILURE_FILE_ENV}" ]; then
  read -r failed reason < "${FAILURE_FILE_ENV}"
  echo "kubetrain: a rank failed for good; exiting $failed so the job fails instead of retrying: $reason" >&2
  exit $failed
fi
if [ $stopped -ne 0 ]; then
  echo "kubetrain: stopped by a signal (a trainer's ranks save a checkpoint first); exiting $stopped so the pod is restarted" >&2
  exit $stopped
fi
echo "kubetrain: torchrun exited $code after its restart budget; exiting {EXIT_RETRY} so the pod is retried" >&2
exit {EXIT_RETRY}
"""
_CHECK_CONFIG = 'python -m training --check --config "$KUBETRAIN_RUN_CONFIG" || exit\n'
# The script reads the config's path from the environment, where run-local can map it.
CONFIG_ENV = {RUN_CONFIG_ENV: CONFIG_PATH}


def torchrun_args(job: JobSpec) -> list[str]:
    """torchrun's flags: the restart budget, c10d rendezvous (the only backend with which the other
    pods notice a restart and restart theirs), and the target's way of finding the peers."""
    return [f"--max-restarts={job.props.max_restarts}", "--rdzv-backend=c10d",
            *job.props.target.rendezvous_args(job.request), f"--rdzv-id={job.name}"]


def container_command(job: JobSpec) -> list[str]:
    command = job.command
    if command is not None and command.launcher == "none":
        return list(command.command)
    function = job.function
    if job.trainer:
        program, script = ["-m", "training", "--config", CONFIG_PATH], _CHECK_CONFIG + _RUN_TORCHRUN
    elif function is not None:  # the captured source; its packages first, as the Kubeflow SDK installs them
        # A function on the runtime (its `run` parameter) starts warm: a restarted rank forks from a process that
        # has imported torch (kubetrain_runtime/__main__.py).
        program = [*(["-m", "kubetrain_runtime"] if function.takes_run else []), f"{CONFIG_MOUNT}/{FUNCTION_FILE}"]
        script = (INSTALL_SCRIPT if function.packages else "") + _RUN_TORCHRUN
    elif command.profile is not None:
        program, script = profiled_program(command.profile, job.name, list(command.command)), _RUN_TORCHRUN
    else:
        program, script = list(command.command), _RUN_TORCHRUN
    # "$0" of the script is its name in `ps` and in error messages.
    return ["/bin/sh", "-c", script, "kubetrain-launch", *torchrun_args(job), *program]


def expected_save_s(run: RunConfig, nodes: int) -> float:
    """Seconds a durable checkpoint of `run` takes on `nodes` nodes, at the assumed write rate."""
    return checkpoint_bytes(run.model) / (nodes * WRITE_BYTES_PER_S_PER_NODE)


def stop_needs_s(run: RunConfig, nodes: int) -> int:
    """Seconds from a stop signal for the ranks to finish a step, agree, save and exit: twice the expected save."""
    return math.ceil(STOP_OVERHEAD_S + 2 * expected_save_s(run, nodes))


def grace_period_s(job: JobSpec) -> int | None:
    """The pod's terminationGracePeriodSeconds: the pod settings', else for trainer jobs room for the stop
    checkpoint (at the fewest nodes the job runs on), else Kubernetes' default (None: not written)."""
    if job.props.pod.termination_grace_period_s is not None:
        return job.props.pod.termination_grace_period_s
    if job.trainer is None:
        return None
    return max(DEFAULT_TERMINATION_GRACE_S, stop_needs_s(job.trainer.run, job.node_range.start))


def launch_env(job: JobSpec) -> dict[str, str]:
    """The launcher's variables for torchrun (and its ranks): see LAUNCH_ENV, and the shutdown timeout."""
    grace = grace_period_s(job)
    grace = DEFAULT_TERMINATION_GRACE_S if grace is None else grace
    return LAUNCH_ENV | {SHUTDOWN_TIMEOUT_ENV: str(max(1, grace - SHUTDOWN_MARGIN_S))}
