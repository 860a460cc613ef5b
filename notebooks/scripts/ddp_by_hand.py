"""Average gradients by hand with all_reduce, then let DDP do it: the same training.

    torchrun --standalone --nproc-per-node=2 ddp_by_hand.py

Each rank trains two copies of ddp_train.py's model from one start, on its share of
every global batch, on the CPU (gloo). The first copy averages its gradients itself,
one all-reduce per parameter tensor after `backward`: what DDP automates. The second
is wrapped in DDP, which packs the gradients into buckets (25 MB by default) and
all-reduces a bucket as soon as all its gradients are ready. This model's 57 KiB of
gradients fit in one bucket, ready only when `backward` ends, so here DDP makes one
all-reduce per step, after `backward`, and nothing overlaps: the gain over the copy
by hand is one collective instead of eight. Overlap needs several buckets; notebook
11 (Communication) measures it. Rank 0 reports how far apart the copies end, on
every rank, and how many all-reduces each made per step; --dump saves that.
`as_ranks` runs an averaging function as several ranks in threads of one process,
with a stand-in all_reduce: notebook 10's exercise checks answers with it.
Notebook 10 runs it. Copy the whole folder, not this file: it imports common.py.
"""

from __future__ import annotations

import argparse
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from common import Net, make_data, save_record, setup
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn import functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.nn.utils import parameters_to_vector


@dataclass
class ByHand:
    """What rank 0 saves to --dump (notebook 10 reads it)."""

    world_size: int
    steps: int
    max_gap: float  # largest |by hand - DDP| weight, over every rank
    rank_spread: float  # largest difference of DDP's weights between ranks
    hand_allreduces: float  # per step
    ddp_allreduces: float  # per step: its buckets
    params: int  # parameter tensors


def as_ranks(fn: Callable, models: list[torch.nn.Module]) -> list[int]:
    """Run fn(model, world, all_reduce) for every model at once, each in a thread that
    stands in for a rank, with an all_reduce that sums (or, with op=ReduceOp.AVG,
    averages) over them in place, as dist.all_reduce does, and with async_op=True
    returns a finished work to wait on; return the rank of every all_reduce call."""
    world, posted, calls, errors = len(models), {}, [], []
    meet = threading.Barrier(world, timeout=30)  # a missing rank: an error, no hang

    class Done:  # what dist.all_reduce(..., async_op=True) returns, already finished
        def wait(self, *args, **kwargs) -> bool:
            return True

        def is_completed(self) -> bool:
            return True

    def all_reduce(r: int, t: torch.Tensor, op=None, group=None,
                   async_op: bool = False) -> Done | None:
        average = op is not None and op == dist.ReduceOp.AVG
        if op is not None and not average and op != dist.ReduceOp.SUM:
            raise ValueError(f"the stand-in all_reduce sums or averages, not {op}")
        calls.append(r)
        posted[r] = t.detach().clone()
        meet.wait()  # every rank has posted its tensor
        total = sum(posted[k] for k in range(world))
        t.copy_(total / world if average else total)
        meet.wait()  # every rank has read them all
        return Done() if async_op else None

    def rank(r: int) -> None:
        try:
            fn(models[r], world, lambda t, *a, **k: all_reduce(r, t, *a, **k))
        except Exception as err:  # raised again below, in the caller's thread
            errors.append(err)
            meet.abort()  # the other ranks stop waiting

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(world)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return calls


def average_gradients(model: torch.nn.Module, world: int) -> int:
    """Replace every gradient by its mean over the ranks; return the all-reduces."""
    calls = 0
    for p in model.parameters():
        dist.all_reduce(p.grad)  # the sum over all ranks, in place, on every rank
        p.grad /= world  # the mean, as if one process had seen the whole batch
        calls += 1
    return calls


def train(model: torch.nn.Module, batches: list, by_hand: bool, world: int,
          lr: float) -> int:
    """Take one SGD step per batch; return the all-reduces made by hand."""
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    calls = 0
    for x, y in batches:
        F.cross_entropy(model(x), y).backward()  # DDP all-reduces in here
        if by_hand:
            calls += average_gradients(model, world)  # we do it after backward
        opt.step()
        opt.zero_grad(set_to_none=True)
    return calls


@record  # a crashing rank's error reaches torchrun, and the launcher's message
def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=64, help="global batch")
    p.add_argument("--dump", default=None, help="rank 0 saves its ByHand record here")
    args = p.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    setup("cpu")  # gloo on the CPU, as torchrun prepared it
    rank, world = dist.get_rank(), dist.get_world_size()
    x, y = make_data(args.steps * args.batch_size, 16, seed=0).tensors
    batches = [(xb[rank::world], yb[rank::world])  # this rank's share of each batch
               for xb, yb in zip(x.split(args.batch_size), y.split(args.batch_size),
                                 strict=True)]
    torch.manual_seed(0)
    by_hand, wrapped = Net(16), Net(16)
    wrapped.load_state_dict(by_hand.state_dict())  # one start for both
    hand_calls = train(by_hand, batches, True, world, lr=0.1)
    ddp = DDP(wrapped)
    ddp_calls = []
    ddp.register_comm_hook(None, lambda state, bucket: (
        ddp_calls.append(bucket.buffer().numel()) or allreduce_hook(state, bucket)))
    train(ddp, batches, False, world, lr=0.1)
    mine = parameters_to_vector(wrapped.parameters()).detach()
    gap = (parameters_to_vector(by_hand.parameters()).detach() - mine).abs().max()
    dist.all_reduce(gap, op=dist.ReduceOp.MAX)  # the largest gap on any rank
    every = [torch.empty_like(mine) for _ in range(world)]
    dist.all_gather(every, mine)
    spread = max((w - every[0]).abs().max().item() for w in every)
    result = ByHand(world, args.steps, gap.item(), spread, hand_calls / args.steps,
                    len(ddp_calls) / args.steps, sum(1 for _ in by_hand.parameters()))
    if rank == 0:
        print(f"{world} ranks, {args.steps} steps: by hand "
              f"{result.hand_allreduces:g} all-reduces per step (one per "
              f"parameter tensor), DDP {result.ddp_allreduces:g} (its buckets)")
        print(f"by hand vs DDP: max |difference| {result.max_gap:.1e} over all "
              f"ranks; DDP's copies on the ranks differ by {spread:.1e}")
        if args.dump:  # its folder too: save_record makes it
            save_record(Path(args.dump), result)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
