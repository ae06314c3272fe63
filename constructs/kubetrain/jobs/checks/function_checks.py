"""Job rules on a Function workload's source: every name it reads defined, no DataParallel under several
ranks."""

from __future__ import annotations

import sys
from collections.abc import Iterator

from kubetrain.jobs.checks.job_rules import JobRules, Violation
from kubetrain.jobs.spec import JobSpec

RULES = JobRules()  # this module's rules, in the order their problems are reported
job_rule = RULES.rule


@job_rule("KT158", "error", "a name the function reads that nothing defines",
          rationale="The pods run the function's source alone, in a module of its own: a name it reads that it "
                    "neither defines, imports nor receives, and that is not a builtin, raises NameError on every "
                    "rank once the pods have started (the Kubeflow guide's batch snippet calls os without importing "
                    "it). Where the source can bind names unseen (exec, eval, globals(), vars()) or its module "
                    "star-imports, nothing is judged; a use under `if TYPE_CHECKING:` or in a try that catches "
                    "NameError is not reported.",
          fix="import the name inside the function (or define it there, or pass its value in kwargs)",
          source="https://docs.python.org/3/reference/executionmodel.html#resolution-of-names")
def function_names_defined(job: JobSpec) -> Iterator[Violation]:
    function = job.function
    for name, where in function.undefined_names() if function else []:
        fix = (f"add `import {name}` at the top of the function's body" if name in sys.stdlib_module_names else
               f"import {name} inside the function, define it there, or pass its value in kwargs")
        yield ("workload.func", f"{function.where} reads {name!r} ({where}), which it neither defines, imports nor "
               "receives, and which is no builtin: a NameError on every rank once the pods start", fix)


@job_rule("KT159", "warning", "torch.nn.DataParallel in a function that runs as several ranks",
          rationale="torchrun starts one process per rank, and DataParallel makes each of them drive every GPU it "
                    "sees on its own: N unsynchronised copies of the model, each with its own gradients, that "
                    "never average. PyTorch recommends DistributedDataParallel, one process per GPU, over "
                    "DataParallel even on one node.",
          fix="wrap the model in torch.nn.parallel.DistributedDataParallel(model.to(device), "
              "device_ids=[local_rank]) after dist.init_process_group()",
          source="https://docs.pytorch.org/docs/stable/notes/cuda.html#cuda-nn-ddp-instead")
def function_without_data_parallel(job: JobSpec) -> Iterator[Violation]:
    function = job.function
    ranks = job.max_nodes * job.props.procs_per_node
    lines = function.data_parallel_lines() if function and ranks > 1 else []
    if lines:
        where = f"{function.file_name} line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))}"
        yield ("workload.func", f"{function.where} uses torch.nn.DataParallel ({where}) and runs as up to {ranks} "
               "ranks: each rank would drive all of its GPUs alone, with no gradient averaging between ranks")
