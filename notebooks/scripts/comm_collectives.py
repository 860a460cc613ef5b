"""The collectives by what each rank holds before and after them.

    torchrun --standalone --nproc-per-node=4 comm_collectives.py --out build/comm

Every rank records what it holds before and after each collective (broadcast,
reduce, all_reduce, reduce_scatter, all_gather, send/recv); rank 0 writes them all
as one `Collectives` record to collectives.json. Notebook 11 runs it through
comm_lessons.py. Copy the whole folder, not this file: it imports common.py and
comm_model.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from comm_model import parse_args
from common import leave, save_record, setup
from torch.distributed.elastic.multiprocessing.errors import record


@dataclass
class Held:
    """What every rank held before and after one collective (rank by rank)."""

    before: list[list[float]]
    after: list[list[float] | None]  # None: not defined there (reduce off dst)


@dataclass
class Collectives:
    """What rank 0 writes to <out>/collectives.json (notebook 11 reads it)."""

    world: int
    backend: str
    device: str
    held: dict[str, Held]  # by collective


def collectives(device: torch.device) -> dict[str, Held]:
    """Run each collective on small tensors; return what each rank held, before/after.

    Rank r starts with [10r, 10r+1, ..., 10r+N-1] (N ranks), so every value says
    where it came from. The tensor after `reduce` on ranks other than dst is scratch
    space (its contents are not defined), so only dst's is kept.
    """
    rank, world = dist.get_rank(), dist.get_world_size()

    def mine() -> torch.Tensor:
        return torch.arange(world, dtype=torch.float32, device=device) + 10 * rank

    ran = {}
    t = mine()
    before = t.tolist()
    dist.broadcast(t, src=0)  # rank 0's tensor, copied to every rank
    ran["broadcast"] = (before, t.tolist())
    t = mine()
    dist.reduce(t, dst=0)  # the sum over ranks, on rank 0 only
    ran["reduce"] = (mine().tolist(), t.tolist() if rank == 0 else None)
    t = mine()
    dist.all_reduce(t)  # the sum over ranks, on every rank
    ran["all_reduce"] = (mine().tolist(), t.tolist())
    out = torch.zeros(1, device=device)
    dist.reduce_scatter(out, list(mine().chunk(world)))  # rank r: the sum of chunk r
    ran["reduce_scatter"] = (mine().tolist(), out.tolist())
    parts = [torch.zeros(world, device=device) for _ in range(world)]
    dist.all_gather(parts, mine())  # every rank's tensor, on every rank
    ran["all_gather"] = (mine().tolist(), torch.cat(parts).tolist())
    t = mine()
    if rank == 0 and world > 1:
        dist.send(t, dst=world - 1)  # point to point: one sender, one receiver
    elif rank == world - 1 and world > 1:
        dist.recv(t, src=0)
    ran["send_recv"] = (mine().tolist(), t.tolist())
    every = [None] * world
    dist.all_gather_object(every, ran)  # small Python objects, pickled
    return {name: Held([e[name][0] for e in every], [e[name][1] for e in every])
            for name in ran}


def run(out: Path, device: torch.device) -> None:
    """Run every collective; rank 0 writes the record to `out`."""
    held = collectives(device)
    if dist.get_rank() == 0:
        save_record(out / "collectives.json", Collectives(
            dist.get_world_size(), dist.get_backend(), device.type, held))
        print(f"{dist.get_world_size()} ranks, {dist.get_backend()} on {device.type}: "
              f"{len(held)} collectives recorded")


@record  # a crashing rank's traceback reaches torchrun's summary
def main(argv: list[str] | None = None) -> None:
    args = parse_args(__doc__, argv)
    device = setup(args.device)
    run(Path(args.out), device)
    leave()


if __name__ == "__main__":
    main()
