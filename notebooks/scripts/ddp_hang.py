"""A planted hang: a collective that only rank 0 calls. Find it, then fix it.

    TORCH_DISTRIBUTED_DEBUG=DETAIL torchrun --nproc-per-node=2 ddp_hang.py

Each rank counts its right answers and samples; the job should add them up over
all ranks. The bug is a common one: the all-reduce sits inside `if rank == 0:`,
next to the printing, so rank 0 waits in it while rank 1 goes on to the final
barrier. Nothing matches. On gloo (used here on every machine) the ranks wait for
each other until the group's timeout (--timeout, in seconds), then raise. With
TORCH_DISTRIBUTED_DEBUG=DETAIL, every collective is first checked against the other
ranks' (operation, shapes, dtypes), so the mismatch is reported at once. On nccl the
same bug can be worse than a timeout: nccl's barrier is itself an all-reduce, so it
may pair with rank 0's all-reduce and go on with garbage, or hang. --fixed moves
the all-reduce out of the `if`, where every rank calls it. Notebook 10 runs it. Copy
the whole folder, not this file: it imports common.py.
"""

from __future__ import annotations

import argparse
import datetime
import time

import torch
import torch.distributed as dist
from common import setup
from torch.distributed.elastic.multiprocessing.errors import record


@record  # a crashing rank's error reaches torchrun, and the launcher's message
def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--timeout", type=float, default=30.0,
                   help="seconds a collective may wait before the group gives up")
    p.add_argument("--fixed", action="store_true", help="every rank all-reduces")
    args = p.parse_args()
    setup("cpu")  # gloo on every machine, so the demo fails the same way everywhere
    # A short timeout, so that a hang ends in an error: a group of the same ranks.
    group = dist.new_group(timeout=datetime.timedelta(seconds=args.timeout))
    rank = dist.get_rank()
    counts = torch.tensor([10.0 + rank, 16.0])  # this rank's [right, seen]
    start = time.monotonic()
    try:
        if args.fixed:
            dist.all_reduce(counts, group=group)  # every rank calls it
        if rank == 0:
            if not args.fixed:  # BUG: only rank 0 calls this collective
                dist.all_reduce(counts, group=group)
            print(f"accuracy {counts[0] / counts[1]:.1%} of {counts[1]:.0f} samples")
        dist.barrier(group=group)  # rank 1 is already here
    except RuntimeError:
        print(f"rank {rank} gave up after {time.monotonic() - start:.1f} s "
              f"(timeout {args.timeout:g} s)", flush=True)
        raise
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
