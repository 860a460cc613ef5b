"""A ring all-reduce built from send/recv, against dist.all_reduce.

    torchrun --standalone --nproc-per-node=4 comm_ring.py --out build/comm

A reduce-scatter, then an all-gather, each N-1 steps of batched isend/irecv to the
neighbours; every rank counts the bytes it sends. Rank 0 writes one `Ring` record
to ring.json. Hand-written on purpose: notebook 11 teaches the ring by it (through
comm_lessons.py). Copy the whole folder, not this file: it imports common.py and
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
class Ring:
    """The ring all-reduce against dist.all_reduce, on one rank's data."""

    numel: int
    bytes_per_rank: int
    sent: int  # bytes this rank sent
    max_diff: float  # largest |ring - all_reduce|
    max_abs: float  # largest |all_reduce|


def ring_all_reduce(t: torch.Tensor) -> int:
    """Sum `t` over all ranks in place, in a ring; return the bytes this rank sent.

    The tensor is cut into N chunks. Reduce-scatter: in N-1 steps each rank sends one
    chunk to its right neighbour and adds the chunk it gets from its left one; after
    them rank r holds the full sum of chunk r+1. All-gather: N-1 more steps pass the
    summed chunks around the ring, each rank copying what it gets.
    """
    rank, world = dist.get_rank(), dist.get_world_size()
    right, left = (rank + 1) % world, (rank - 1) % world
    chunks = list(t.view(-1).tensor_split(world))  # views: writing them writes t
    sent = 0
    for step in range(2 * (world - 1)):
        send_i = (rank - step) % world  # the chunk this rank passes on at this step
        recv_i = (rank - step - 1) % world
        got = torch.empty_like(chunks[recv_i])
        ops = [dist.P2POp(dist.isend, chunks[send_i], right),
               dist.P2POp(dist.irecv, got, left)]
        # Grouped: the send and the receive are posted together before either is
        # waited on. Plain isend/irecv work too; a blocking send first on every rank
        # could wait forever on nccl, whose send may wait until its receive is posted.
        for req in dist.batch_isend_irecv(ops):
            req.wait()
        sent += chunks[send_i].numel() * chunks[send_i].element_size()
        if step < world - 1:
            chunks[recv_i] += got  # reduce-scatter: add the neighbour's partial sum
        else:
            chunks[recv_i].copy_(got)  # all-gather: the chunk is complete; keep it
    return sent


def check_ring(device: torch.device, numel: int) -> Ring:
    """Compare ring_all_reduce with dist.all_reduce on random data; count bytes."""
    g = torch.Generator().manual_seed(dist.get_rank())
    x = torch.randn(numel, generator=g).to(device)
    ours, theirs = x.clone(), x.clone()
    sent = ring_all_reduce(ours)
    dist.all_reduce(theirs)
    return Ring(numel, x.numel() * x.element_size(), sent,
                (ours - theirs).abs().max().item(), theirs.abs().max().item())


def run(out: Path, device: torch.device, numel: int = 2**20) -> None:
    """Check the ring on every rank; rank 0 writes the record to `out`."""
    ring = check_ring(device, numel)
    if dist.get_rank() == 0:
        save_record(out / "ring.json", ring)
        print(f"{dist.get_world_size()} ranks, {dist.get_backend()} on {device.type}: "
              f"ring all-reduce sent {ring.sent} bytes per rank; max difference from "
              f"all_reduce {ring.max_diff:.1e}")


@record  # a crashing rank's traceback reaches torchrun's summary
def main(argv: list[str] | None = None) -> None:
    args = parse_args(__doc__, argv)
    device = setup(args.device)
    run(Path(args.out), device, args.ring_numel)
    leave()


if __name__ == "__main__":
    main()
