"""Uneven inputs: without Join, the rank with fewer batches leaves DDP's peers hung.

    TORCH_FR_BUFFER_SIZE=2000 torchrun --standalone --nproc-per-node=2 \
        comm_join.py --out build/comm

Rank r trains on 2 + N-1-r batches, on the CPU over gloo on every machine (as
ddp_hang.py: nccl's watchdog would end the process). First without Join: a hang,
ended by a short --timeout; the Flight Recorder's entries of the hung group, where
this torch has one, go to fr_rank<r>.json. Then with Join, in a fresh group. Rank 0
writes every rank's `Uneven` record, in an `UnevenRanks` record, to uneven.json.
Notebook 11 runs it through comm_lessons.py. Copy the whole folder, not this file: it
imports common.py and comm_model.py.
"""

from __future__ import annotations

import copy
import datetime
import json
import pickle
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from comm_model import batch, make_model, parse_args, train_step, wrap
from common import leave, save_record, setup
from torch import nn
from torch.distributed.algorithms.join import Join
from torch.distributed.elastic.multiprocessing.errors import record


@dataclass
class Hang:
    """How the run without Join ended."""

    seconds: float
    error: str  # the error's first line


@dataclass
class Uneven:
    """One rank's run."""

    batches: int
    hang: Hang | None  # None: it did not hang
    join_rank_spread: float  # with Join: largest weight difference between ranks


@dataclass
class UnevenRanks:
    """What rank 0 writes to <out>/uneven.json (notebook 11 reads it)."""

    ranks: list[Uneven]


def uneven(base: nn.Module, device: torch.device, width: int, bsz: int,
           timeout: float, out: Path) -> Uneven:
    """Rank r trains on 2 + N-1-r batches: first without Join (a hang), then with."""
    rank, world = dist.get_rank(), dist.get_world_size()
    mine = 2 + world - 1 - rank  # rank 0 has the most batches, the last rank 2
    # gloo on every machine (as ddp_hang.py): nccl's watchdog would end the process
    short = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=timeout))
    model = wrap(copy.deepcopy(base), device, cap=25, group=short)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    hang = None
    recorded = out / f"fr_rank{rank}.json"
    recorded.unlink(missing_ok=True)  # an earlier run's record is not this one's
    start = time.monotonic()
    try:
        for s in range(mine):
            train_step(model, opt, *batch(width, bsz, s, device))
        dist.barrier(group=short)  # "all done": the ranks with fewer batches wait here
    except RuntimeError as err:  # the short timeout ends the hang
        hang = Hang(time.monotonic() - start, str(err).split("\n")[0][:200])
    fr = getattr(torch._C._distributed_c10d, "_dump_fr_trace", None)
    if fr is not None:  # the Flight Recorder: the last collectives of each group
        entries = pickle.loads(fr()).get("entries", [])
        keep = ("collective_seq_id", "profiling_name", "input_sizes", "state")
        recorded.write_text(json.dumps(
            [{k: e.get(k) for k in keep} for e in entries
             if e.get("process_group", [None])[0] == short.group_name]))
    joined = dist.new_group(backend="gloo")  # a fresh group: the hung one is done
    model = wrap(copy.deepcopy(base), device, cap=25, group=joined)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with Join([model]):  # a rank that runs out of batches shadows the others' steps
        for s in range(mine):
            train_step(model, opt, *batch(width, bsz, s, device))
    w = torch.cat([p.detach().flatten() for p in model.parameters()])
    every = [torch.empty_like(w) for _ in range(world)]
    dist.all_gather(every, w, group=joined)
    return Uneven(mine, hang, max((e - w).abs().max().item() for e in every))


def run(args) -> UnevenRanks:
    """Run `uneven` on every rank, on the CPU; rank 0 writes every rank's record."""
    out = Path(args.out)
    mine = uneven(make_model(args.layers, args.width), torch.device("cpu"),
                  args.width, args.batch, args.timeout, out)
    every = [None] * dist.get_world_size()
    dist.all_gather_object(every, mine)
    result = UnevenRanks(every)
    if dist.get_rank() == 0:
        save_record(out / "uneven.json", result)
    return result


@record  # a crashing rank's traceback reaches torchrun's summary
def main(argv: list[str] | None = None) -> None:
    args = parse_args(__doc__, argv)
    setup(args.device)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    run(args)
    leave()


if __name__ == "__main__":
    main()
