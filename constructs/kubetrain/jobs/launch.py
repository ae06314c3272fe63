"""How a pod starts its ranks: torchrun, wrapped so the operator's restart policy can tell faults from bad input.

torchrun restarts a pod's ranks up to `max_restarts` times, then exits 1, whatever killed them.
Under `restartPolicy: ExitCode` an exit of 1-127 fails the job for good and 128-255 restarts the
pod, so a bare torchrun would end a job whose ranks kept crashing as if its config were bad. The
launcher script keeps the two apart:
- a bad run config (trainer jobs) is found before torchrun starts and exits 2: the job fails at once;
- ranks that keep failing past torchrun's budget exit `EXIT_RETRY`: the operator restarts the pod
  (a fresh node, perhaps) up to the job's `backoff_limit`.
The script stays in the foreground as the container's first process and passes the pod's stop
signal on to torchrun, so ranks can finish a checkpoint before the grace period ends.
"""

from __future__ import annotations

from kubetrain.jobs.function import FUNCTION_FILE, INSTALL_SCRIPT
from kubetrain.jobs.spec import CONFIG_FILE, CONFIG_MOUNT, JobSpec

EXIT_RETRY = 200
CONFIG_PATH = f"{CONFIG_MOUNT}/{CONFIG_FILE}"

# torchrun's agents otherwise hand their workers one TCPStore that outlives every restart: keys
# left by the attempt before (a dead peer's address) are read by the next one, and agents that
# restarted for different reasons (a failure, or a peer's re-rendezvous) disagree on the attempt
# number that could tell them apart. With sharing off, rank 0 of every attempt hosts a fresh store
# on a port its agent picks.
LAUNCH_ENV: dict[str, str] = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}

_RUN_TORCHRUN = f"""torchrun "$@" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null' TERM INT
wait $pid; code=$?
while kill -0 $pid 2>/dev/null; do wait $pid; code=$?; done
[ $code -eq 0 ] && exit 0
echo "kubetrain: torchrun exited $code after its restart budget; exiting {EXIT_RETRY} so the pod is retried" >&2
exit {EXIT_RETRY}
"""
_CHECK_CONFIG = 'python -m training --check --config "$KUBETRAIN_RUN_CONFIG" || exit\n'
# The script reads the config's path from the environment, where run-local can map it.
CONFIG_ENV = {"KUBETRAIN_RUN_CONFIG": CONFIG_PATH}


def torchrun_args(job: JobSpec) -> list[str]:
    """torchrun's flags: the restart budget, c10d rendezvous (the only backend with which the other
    pods notice a restart and restart theirs), and the target's way of finding the peers."""
    return [f"--max-restarts={job.props.max_restarts}", "--rdzv-backend=c10d",
            *job.props.target.rendezvous_args(job), f"--rdzv-id={job.name}"]


def container_command(job: JobSpec) -> list[str]:
    command = job.command
    if command is not None and command.launcher == "none":
        return list(command.command)
    function = job.function
    if job.trainer:
        program, script = ["-m", "training", "--config", CONFIG_PATH], _CHECK_CONFIG + _RUN_TORCHRUN
    elif function is not None:  # the captured source; its packages first, as the Kubeflow SDK installs them
        program = [f"{CONFIG_MOUNT}/{FUNCTION_FILE}"]
        script = (INSTALL_SCRIPT if function.packages else "") + _RUN_TORCHRUN
    else:
        program, script = list(command.command), _RUN_TORCHRUN
    # "$0" of the script is its name in `ps` and in error messages.
    return ["/bin/sh", "-c", script, "kubetrain-launch", *torchrun_args(job), *program]
