"""Warm ranks: under torchrun, a pod's ranks are forks of one process that has imported torch and the program.

A fresh interpreter spends about two seconds importing torch, DCP and the program before it can rejoin
the job, which is most of what a crashed rank costs (torchrun restarts every rank of the pod). So the
process torchrun starts for a rank is a thin client that imports none of that: it connects to the
pod's warm process over a Unix socket (the pods' torchrun, kubetrain_runtime.torchrun, forks it from the agent
with torch imported, `start_from_agent`; under plain torchrun the first client starts it), hands over its
arguments, environment, working folder and standard streams, and the warm process forks a child that
becomes the rank. The client stays in between, as torchrun's view of the rank: it passes torchrun's
signals on (SIGCONT after one that asks the rank to end, so that a stopped rank ends too), and exits with the
rank's exit status or dies of the same signal. The rank dies with its
client, so killing what torchrun started still kills the rank: the warm process watches each client's pidfd and
SIGKILLs its rank when the client ends, which reaches a rank even while it is stopped or stuck in native code (a
thread of the rank's own could not run then; the rank also watches, for a warm process that is gone). The warm
process exits when its torchrun agent does, and its ranks die with it (the kernel's parent-death signal).

The warm process never starts a thread or touches an accelerator, which is what makes forking it safe:
CUDA, NCCL, the process group and the thread pools are all set up in the child, after it has taken the
client's environment. Besides importing, it rehearses a rank's first steps on tiny CPU tensors when torch
runs one intra-op thread (`rehearse`), and starts no rank if that left a thread behind.

The program is an entry module, named by the client: `training.__main__` (kubetrain's trainer) or
`kubetrain_runtime.__main__` (a script or function of the user's own on kubetrain_runtime.Run). The warm process
imports the modules its `preloads(argv)` names for the ranks' arguments (and PRELOADED), runs its `rehearse()`, and
each rank calls its `run(argv)`.

Linux only (pidfds, SCM_RIGHTS); KUBETRAIN_WARM=0 turns it off, and then each rank imports everything
itself, as it does when no warm process can be had. This module imports only the standard library at
the top (the client must start in milliseconds); what the first client or the warm process needs, they
import where they need it.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import select
import signal
import socket
import struct
import sys
import time

ENABLE_ENV = "KUBETRAIN_WARM"
STARTED_ENV = "KUBETRAIN_CLIENT_STARTED"  # when torchrun's process for the rank started (epoch seconds)
# torchrun passes these on to its ranks (its --signals-to-handle default): so does the client.
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
# Those that ask the rank to end: SIGCONT follows them (as systemd's stop does), since a stopped rank (SIGSTOP, a
# job-control stop) would hold them pending, and torchrun would wait out its 30 s before its SIGKILL.
ENDING_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)
START_TIMEOUT_S = 600.0  # the warm process's imports, on a busy node
# What every rank imports besides its program: what torch imports only on first use: dynamo, which any function
# torch keeps from compiling imports when first called (AdamW's constructor is one: a second of a rank's start), and
# DCP's fsspec storage, which its save and load look for; and the Prometheus client, which a rank in a job (its
# metrics port on) imports when its telemetry starts (a tenth of a second of each restart on a busy node).
PRELOADED = ("torch._dynamo", "torch.distributed.checkpoint._fsspec_filesystem", "prometheus_client")
_HEADER = struct.Struct("!I")


def _enabled() -> bool:
    """Linux (pidfds), unless turned off."""
    return sys.platform.startswith("linux") and hasattr(os, "pidfd_open") and os.environ.get(ENABLE_ENV, "1") != "0"


def wanted() -> bool:
    """Whether this rank should run in the warm process: under torchrun, on Linux, unless turned off."""
    return _enabled() and "TORCHELASTIC_RUN_ID" in os.environ


def socket_name(agent_pid: int) -> str:
    """The warm process's address: a Linux abstract socket (no file to clean up, whatever the length of the temp folder's path), one per
    torchrun agent."""
    return f"\0kubetrain-warm-{os.getuid()}-{agent_pid}"


def lock_path(agent_pid: int) -> str:
    import tempfile

    return os.path.join(tempfile.gettempdir(), f"kubetrain-warm-{os.getuid()}-{agent_pid}.lock")


# -- the client: the process torchrun started -------------------------------------------------------------

def run_in_warm_process(argv: list[str], entry: str) -> int | None:
    """Run this rank as a fork of the warm process of `entry` (a module name); its exit code, or None when no warm
    process can be had."""
    started = time.time()
    agent = os.getppid()
    conn = _connect(agent, entry, argv)
    if conn is None:
        return None
    with conn:
        env = {**os.environ, STARTED_ENV: repr(started)}
        # torchrun starts every rank's python with -u (its stdout writes through): the rank's streams follow.
        request = json.dumps({"argv": argv, "env": env, "cwd": os.getcwd(), "client": os.getpid(),
                              "unbuffered": bool(getattr(sys.stdout, "write_through", False))})
        payload = request.encode()
        socket.send_fds(conn, [_HEADER.pack(len(payload)) + payload], _standard_streams())
        reader = conn.makefile("r")
        started = reader.readline()
        if not started:
            return None  # the warm process refused or died before forking: run here instead
        rank = json.loads(started)["pid"]
        for signum in FORWARDED_SIGNALS:
            signal.signal(signum, lambda number, frame: _pass_on(rank, number))
        ended = reader.readline()
    if not ended:  # the warm process died: nobody can report the rank's end, so end it
        _forward(rank, signal.SIGKILL)
        print("kubetrain: the warm process died; ending the rank", file=sys.stderr)
        return 1
    status = json.loads(ended)
    if "signal" in status:
        return _die_of(status["signal"])
    return status["exit"]


def _die_of(signum: int) -> int:
    """Die of the signal the rank died of, so that torchrun sees the same: its default action restored first (the
    forwarding handler's; SIGKILL and SIGSTOP have no handler to restore, and cannot be caught anyway). Should the
    process outlive it (a signal whose default is to be ignored), the shell's code for it."""
    if signum not in (signal.SIGKILL, signal.SIGSTOP):
        signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    return 128 + signum


def _standard_streams() -> list[int]:
    """fds 0, 1 and 2, with /dev/null for any that is closed (a rank expects all three)."""
    streams = []
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
            streams.append(fd)
        except OSError:
            streams.append(os.open(os.devnull, os.O_RDWR))
    return streams


def _pass_on(rank: int, signum: int) -> None:
    """A signal torchrun sent the client, to the rank; one that asks it to end, with SIGCONT after it."""
    _forward(rank, signum)
    if signum in ENDING_SIGNALS:
        _forward(rank, signal.SIGCONT)


def _forward(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def _connect(agent: int, entry: str, argv: list[str]) -> socket.socket | None:
    name = socket_name(agent)
    conn = _try_connect(name)
    if conn is not None:
        return conn
    # The first client of the agent starts the warm process; the others wait for it on the lock. (Imported
    # here: a client that finds the warm process running needs none of it.)
    import fcntl
    import subprocess

    with open(lock_path(agent), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        conn = _try_connect(name)
        if conn is not None:
            return conn
        server = subprocess.Popen([sys.executable, "-m", "kubetrain_runtime.warm", str(agent), entry, *argv],
                                  stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, start_new_session=True, close_fds=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline and server.poll() is None:
            conn = _try_connect(name)
            if conn is not None:
                return conn
            time.sleep(0.02)
    return None


def _try_connect(name: str) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(name)
    except OSError:
        conn.close()
        return None
    return conn


# -- the agent's head start ----------------------------------------------------------------------------------

# The entry modules whose ranks run warm, by the name torchrun's `-m` is given (a package runs its __main__).
ENTRIES = {name: entry for entry in ("training.__main__", "kubetrain_runtime.__main__")
           for name in (entry, entry.removesuffix(".__main__"))}


def start_from_agent(torchrun_args: list[str]) -> None:
    """Fork the warm process from the torchrun agent (`python -m kubetrain_runtime.torchrun`, a pod's launcher) before
    torchrun starts: the agent has imported torch, and nothing else has run (a fork carries no thread of the agent's),
    so the warm process imports only the program (about half of what one started by the first client imports), and
    does so while the agent meets its peers. Nothing when the ranks will not run warm: another program, a rank that
    `runs_warm` refuses, turned off, not Linux.

    The agent takes the clients' lock first and the warm process holds it until it listens: a client that cannot
    connect yet waits on the lock for it (`_connect`) instead of starting a second one."""
    entry_name, argv, several = _entry_of(torchrun_args) if _enabled() else (None, [], False)
    if entry_name is None:
        return
    import fcntl

    agent = os.getpid()
    ready = open(lock_path(agent), "w")  # noqa: SIM115 - held by the warm process until it listens
    fcntl.flock(ready, fcntl.LOCK_EX)
    sys.stdout.flush()
    sys.stderr.flush()
    if os.fork():
        ready.close()  # the lock stays with the warm process's copy of it
        return
    code = 1
    try:
        os.setsid()  # as a process started in a session of its own: the agent's process group's signals miss it
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        if several and "OMP_NUM_THREADS" not in os.environ:
            # What torchrun sets in its own environment after this fork, for a warm process it starts to inherit; torch
            # is told too, having read the variable when the agent imported it.
            import torch

            os.environ["OMP_NUM_THREADS"] = "1"
            torch.set_num_threads(1)
        code = serve(agent, entry_name, argv, ready)
    except BaseException:  # noqa: BLE001 - said on the agent's stderr; its ranks then start their own
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(code)  # never the agent's exit functions, nor back into torchrun


def _entry_of(torchrun_args: list[str]) -> tuple[str | None, list[str], bool]:
    """The warm entry module of the ranks that torchrun's arguments start (None if they run none), the ranks'
    arguments, and whether the agent starts several. Torchrun's own parser reads them (its PET_ variables too); a
    count it makes per device ("gpu", "auto") is taken as several, without counting: counting could initialize CUDA
    in the agent, whose forks could then not use it."""
    import io

    from torch.distributed.run import get_args_parser

    with contextlib.redirect_stderr(io.StringIO()), contextlib.suppress(SystemExit):  # torchrun says what is wrong
        args = get_args_parser().parse_args(torchrun_args)
        entry_name = ENTRIES.get(args.training_script) if args.module and not args.no_python else None
        if entry_name is None:
            return None, [], False
        try:
            entry = importlib.import_module(entry_name)  # the standard library only, at its top
        except ImportError:
            return None, [], False
        if entry.runs_warm(args.training_script_args):
            return entry_name, args.training_script_args, str(args.nproc_per_node).strip() != "1"
    return None, [], False


# -- the warm process ---------------------------------------------------------------------------------------

def serve(agent: int, entry_name: str, argv: list[str], ready=None) -> int:
    """Import everything a rank of `entry_name` with arguments `argv` needs, then fork a rank for each client until
    the torchrun agent exits. `ready`, the clients' lock held by the agent that forked this process, is let go once
    it listens."""
    entry = importlib.import_module(entry_name)
    for module in (*entry.preloads(argv), *PRELOADED):
        importlib.import_module(module)
    threads = _thread_count()
    if os.environ.get("OMP_NUM_THREADS") == "1":  # more, and the first tensor op would start torch's thread pool
        entry.rehearse()
    if _thread_count() != threads:  # forking would leave the children a thread pool without its threads
        print(f"kubetrain: the warm process started threads ({threads} -> {_thread_count()}); ranks start cold",
              file=sys.stderr)
        return 1
    # Everything imported so far into the collector's permanent generation (the use Python's docs give gc.freeze:
    # before forking, so that the children's collections never write to the pages they share): no rank's collection,
    # and no exit's, walks torch's 280,000 objects (kubetrain_runtime/interpreter_exit.py).
    gc.freeze()

    agent_fd = os.pidfd_open(agent)
    wakeup, waker = socket.socketpair()
    waker.setblocking(False)
    signal.set_wakeup_fd(waker.fileno(), warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda number, frame: None)  # reaped below, woken through `wakeup`
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(socket_name(agent))  # clients connect only once everything is imported
    listener.listen(64)
    if ready is not None:
        ready.close()
    clients: dict[int, socket.socket] = {}  # rank pid -> the connection of its client
    watched: dict[int, int] = {}  # a client's pidfd -> its rank's pid
    try:
        while True:
            ready = select.select([listener, wakeup, agent_fd, *watched], [], [])[0]
            if agent_fd in ready:
                return 0
            _kill_orphans([fd for fd in ready if fd in watched], watched)
            if wakeup in ready:
                wakeup.recv(4096)
                _reap(clients)
                # A reaped rank's pid may be reused: its client's end must kill nothing.
                _kill_orphans([], watched, [fd for fd, rank in watched.items() if rank not in clients])
            if listener in ready:
                conn = listener.accept()[0]
                forked = _fork_rank(conn, entry.run, [listener, wakeup, waker, *clients.values()],
                                    [agent_fd, *watched])
                if forked is None:
                    conn.close()
                else:
                    rank, client_fd = forked
                    clients[rank] = conn
                    if client_fd is not None:
                        watched[client_fd] = rank
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(lock_path(agent))


def rehearse(model, optimizer) -> None:
    """Run once, alone and on one intra-op thread (torchrun's default for several ranks), what every rank runs first
    after its forward and backward (which the entry module's `rehearse` runs on a tiny model of its kind before it
    calls this): an optimizer step, its state dict, a DCP checkpoint saved and loaded. A process pays for the first
    call of each (torch's dispatch, DCP's planner, the unpickler's setup): a third of a second of a restart, measured,
    which the warm process pays once for every rank it forks."""
    import tempfile

    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    optimizer.step()
    model_state, optim_state = get_state_dict(model, optimizer)
    state = {"model": model_state, "optim": optim_state, "train": {"step": 1}, "rank0": b"rng"}
    with tempfile.TemporaryDirectory() as folder:
        dcp.save(state, checkpoint_id=folder, no_dist=True)
        dcp.load(state, checkpoint_id=folder, no_dist=True)
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])


def _thread_count() -> int:
    return len(os.listdir("/proc/self/task"))


def _reap(clients: dict[int, socket.socket]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = clients.pop(pid, None)
        if conn is None:
            continue
        ended = ({"signal": os.WTERMSIG(status)} if os.WIFSIGNALED(status) else {"exit": os.waitstatus_to_exitcode(status)})
        with contextlib.suppress(OSError):
            conn.sendall((json.dumps(ended) + "\n").encode())
        conn.close()


def _kill_orphans(ended: list[int], watched: dict[int, int], reaped: tuple | list = ()) -> None:
    """Clients that ended (their pidfds readable): SIGKILL their ranks, which a stopped rank cannot ignore. The
    pidfds of clients whose ranks were `reaped` are closed unwatched."""
    for fd in ended:
        _forward(watched.pop(fd), signal.SIGKILL)
        os.close(fd)
    for fd in reaped:
        watched.pop(fd)
        os.close(fd)


def _die_with_parent(parent: int) -> None:
    """The kernel's parent-death signal (prctl PR_SET_PDEATHSIG): SIGKILL this rank when the warm process (its parent,
    which never starts a thread) ends, even while the rank is stopped. Checked against a parent already gone."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # 1: PR_SET_PDEATHSIG (linux/prctl.h)
    if os.getppid() != parent:
        os._exit(1)


def _fork_rank(conn: socket.socket, run, inherited: list, inherited_fds: list[int]) -> tuple[int, int | None] | None:
    """Read a client's request and fork the rank; the rank's pid and its client's pidfd (None if the client is
    gone already), or None if the request was broken."""
    try:
        data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
        (length,) = _HEADER.unpack_from(data)
        data = data[_HEADER.size:]
        while len(data) < length:
            more = conn.recv(length - len(data))
            if not more:
                raise EOFError
            data += more
        request = json.loads(data)
    except (OSError, EOFError, ValueError, struct.error):
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    pid = os.fork()
    if pid:
        for fd in fds:
            os.close(fd)
        with contextlib.suppress(OSError):
            conn.sendall((json.dumps({"pid": pid}) + "\n").encode())
        try:
            return pid, os.pidfd_open(request["client"])
        except ProcessLookupError:  # the client is gone already: so must its rank be
            _forward(pid, signal.SIGKILL)
            return pid, None
    code = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for each in (*inherited, conn):
            each.close()
        for fd in inherited_fds:
            os.close(fd)
        _die_with_parent(parent)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = [sys.argv[0], *request["argv"]]
        if request.get("unbuffered"):
            _unbuffered_standard_streams()
        _die_with(request["client"])
        code = run(request["argv"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - the rank's fault, reported as a rank's would be
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _unbuffered_standard_streams() -> None:
    """stdout and stderr as `python -u` makes them (CPython's create_stdio: the text layer writes through to the
    unbuffered file): the warm process started buffered, writing to /dev/null, and a rank killed by SIGKILL (kill -9,
    the OOM killer) would lose what it printed last, which says what it was doing."""
    import io

    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        unbuffered = io.TextIOWrapper(io.FileIO(stream.fileno(), "w", closefd=False), encoding=stream.encoding,
                                      errors=stream.errors, write_through=True)
        setattr(sys, name, unbuffered)
        setattr(sys, f"__{name}__", unbuffered)


def _die_with(client: int) -> None:
    """End this rank when its client ends (torchrun stops a rank by stopping the client)."""
    try:
        fd = os.pidfd_open(client)
    except ProcessLookupError:
        os._exit(1)

    def watch() -> None:
        select.select([fd], [], [])
        os.kill(os.getpid(), signal.SIGKILL)

    import threading

    threading.Thread(target=watch, name="kubetrain-client-watch", daemon=True).start()


if __name__ == "__main__":
    sys.exit(serve(int(sys.argv[1]), sys.argv[2], sys.argv[3:]))
