"""Nsight Systems on a command job's ranks, wrapped the way it must be under torchrun.

torchrun runs its script with Python on every rank, so `Command(["nsys", "profile", ...])` would run
`python nsys`; and nsys around torchrun itself would profile the launcher, not the ranks. kubetrain instead
starts each rank as torchrun's own program (`--no-python`): nsys, then the same Python and script, so every
rank gets a report of its own, named by job, rank (torchrun's RANK, which nsys expands as %q{RANK}), pod and
process, in a folder on one of the job's persistent volumes. `ranks` limits it to some ranks (a small shell
`case` on RANK picks nsys or the plain program).

    Command(command=["train.py"], profile=NsysProfile(output_dir="/fsx/profiles", ranks=[0], duration_s=60))
"""

from __future__ import annotations

import shlex
from typing import Literal

from pydantic import Field

from kubetrain.model.names import AbsolutePath
from kubetrain.model.strict import StrictProps

NSYS_DOCS = "https://docs.nvidia.com/nsight-systems/UserGuide/index.html"


class NsysProfile(StrictProps):
    """Nsight Systems (`nsys profile`) on the job's ranks; the image must have nsys on its PATH."""

    output_dir: AbsolutePath = Field(..., description="Where the reports go (<job>.rank<R>.<pod>.<pid>.nsys-rep): "
                                                      "a folder on one of the job's persistent volumes.")
    trace: list[Literal["cuda", "nvtx", "osrt", "cudnn", "cublas", "cublas-verbose", "cusparse", "mpi", "ucx",
                        "oshmem", "opengl", "vulkan", "none"]] = Field(
        default_factory=lambda: ["cuda", "nvtx", "osrt"], min_length=1, description="What nsys traces (--trace).")
    ranks: list[int] | None = Field(None, description="Profile only these global ranks; default every rank.")
    delay_s: int = Field(0, ge=0, description="Start collecting this long after each rank starts (--delay): skip "
                                              "start-up and the first, compiling steps.")
    duration_s: int | None = Field(None, gt=0, description="Collect for this long (--duration); default until the "
                                                           "rank exits.")
    capture_range: Literal["none", "cudaProfilerApi", "nvtx"] = Field(
        "none", description="Collect only between the program's own cudaProfilerStart/Stop "
                            "(torch.cuda.profiler.start/stop) or an NVTX range (--capture-range).")

    def command(self, job_name: str) -> list[str]:
        """`nsys profile` and its flags, ending where the profiled program's words begin."""
        words = ["nsys", "profile", f"--trace={','.join(self.trace)}", "--force-overwrite=true",
                 f"--output={self.output_dir.rstrip('/')}/{job_name}.rank%q{{RANK}}.%h.%p"]
        if self.delay_s:
            words.append(f"--delay={self.delay_s}")
        if self.duration_s:
            words.append(f"--duration={self.duration_s}")
        if self.capture_range != "none":
            words.append(f"--capture-range={self.capture_range}")
        return words


def profiled_program(profile: NsysProfile, job_name: str, program: list[str]) -> list[str]:
    """torchrun's arguments after its flags: each rank runs nsys (on the chosen ranks) around Python and the
    command. torchrun runs `python -u <script>`; with --no-python the rank's program is ours, so the same
    interpreter flags are written here."""
    python = ["python", "-u", *program]
    nsys = profile.command(job_name)
    if profile.ranks is None:
        return ["--no-python", *nsys, *python]
    # `$RANK` is the shell's, set by torchrun per rank; Kubernetes expands only `$(...)` in a command.
    choose = (f'case "$RANK" in {"|".join(str(r) for r in sorted(set(profile.ranks)))}) '
              f'exec {shlex.join(nsys)} "$@";; esac; exec "$@"')
    return ["--no-python", "/bin/sh", "-c", choose, "kubetrain-nsys", *python]
