"""The collectives by hand, a ring all-reduce from send/recv, and bandwidth by size.

    torchrun --standalone --nproc-per-node=4 comm_collectives.py --out build/comm

Every rank records what it holds before and after each collective (broadcast,
reduce, all_reduce, reduce_scatter, all_gather, send/recv); rank 0 writes them all
to collectives.json. Then a ring all-reduce built from isend/irecv (a reduce-scatter,
then an all-gather) is compared with dist.all_reduce, counting the bytes each rank
sends. Last, all-reduces from 1 KiB to 64 MiB are timed (medians) and written as the
nccl-tests report them: algbw = bytes / time, busbw = algbw x 2(N-1)/N, with one
rank's memory-copy bandwidth beside them. With one GPU per rank the default group is
nccl and a second, gloo group sweeps CPU tensors too. Rank 0 writes one
`Collectives` record to collectives.json. Notebook 11 runs it through
comm_lessons.py. Copy the whole folder, not this file: it imports common.py and
comm_model.py.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from comm_model import KIB, parse_args
from common import clock, leave, save_record, setup
from torch.distributed.elastic.multiprocessing.errors import record

SIZES = [KIB * 4**k for k in range(9)]  # 1 KiB, 4 KiB, 16 KiB, ..., 64 MiB


@dataclass
class Held:
    """What every rank held before and after one collective (rank by rank)."""

    before: list[list[float]]
    after: list[list[float] | None]  # None: not defined there (reduce off dst)


@dataclass
class Ring:
    """The ring all-reduce against dist.all_reduce, on one rank's data."""

    numel: int
    bytes_per_rank: int
    sent: int  # bytes this rank sent
    max_diff: float  # largest |ring - all_reduce|
    max_abs: float  # largest |all_reduce|


@dataclass
class Row:
    """One size of the bandwidth sweep, as nccl-tests reports it."""

    bytes: int
    seconds: float  # median
    runs: list[float]
    algbw: float  # GB/s: bytes / seconds
    busbw: float  # GB/s: algbw x 2(N-1)/N


@dataclass
class Collectives:
    """What rank 0 writes to <out>/collectives.json (notebook 11 reads it)."""

    world: int
    backend: str
    device: str
    held: dict[str, Held]  # by collective
    ring: Ring
    memcpy_GBps: float  # one rank's host memory copy: gloo's ceiling
    sweeps: dict[str, list[Row]]  # by backend


def sweep_sizes(max_kib: int) -> list[int]:
    """Return the sweep's all-reduce sizes in bytes, from 1 KiB up to `max_kib` KiB."""
    sizes = [s for s in SIZES if s <= max_kib * KIB]
    if not sizes:
        raise ValueError(f"--max-kib {max_kib}: the sweep starts at 1 KiB")
    return sizes


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


def busbw_factor(world: int) -> float:
    """Return nccl-tests' all-reduce factor: busbw = algbw x 2(N-1)/N."""
    return 2 * (world - 1) / world


def time_all_reduce(nbytes: int, device: torch.device, group=None,
                    repeats: int = 5) -> list[float]:
    """Return the seconds of `repeats` all-reduces of `nbytes`, each after a barrier."""
    t = torch.ones(nbytes // 4, device=device)
    times = []
    for i in range(repeats + 2):  # 2 warm-ups
        dist.barrier(group=group)
        start = clock(device)
        dist.all_reduce(t, group=group)
        if i >= 2:
            times.append(clock(device) - start)
    return times


def sweep(device: torch.device, sizes: list[int], group=None) -> list[Row]:
    """Time all-reduces of each size; return nccl-tests' algbw and busbw (GB/s)."""
    world, rows = dist.get_world_size(group), []
    for nbytes in sizes:
        runs = time_all_reduce(nbytes, device, group,
                               repeats=15 if nbytes <= 2**20 else 5)
        t = statistics.median(runs)
        rows.append(Row(nbytes, t, runs, nbytes / t / 1e9,
                        nbytes / t / 1e9 * busbw_factor(world)))
    return rows


def memcpy_gbps(device: torch.device, nbytes: int = 64 * 2**20) -> float:
    """Return the median GB/s of copying `nbytes` within this rank's memory."""
    src = torch.ones(nbytes // 4, device=device)
    dst = torch.empty_like(src)
    times = []
    for _ in range(7):
        start = clock(device)
        dst.copy_(src)
        times.append(clock(device) - start)
    return nbytes / statistics.median(times[2:]) / 1e9


def run(out: Path, device: torch.device, max_kib: int = 64 * KIB,
        ring_numel: int = 2**20) -> None:
    """Run the three parts on every rank; rank 0 writes the record to `out`."""
    rank, world = dist.get_rank(), dist.get_world_size()
    held = collectives(device)
    ring = check_ring(device, ring_numel)
    sizes = sweep_sizes(max_kib)
    groups = {dist.get_backend(): (device, None)}
    if device.type == "cuda":  # also gloo, on CPU tensors, in a second group
        groups["gloo"] = (torch.device("cpu"), dist.new_group(backend="gloo"))
    bandwidth = {name: sweep(dev, sizes, group) for name, (dev, group)
                 in groups.items()}
    # gloo's ranks pass data through host memory: its copy is their ceiling
    copy = memcpy_gbps(torch.device("cpu")) if rank == 0 else None
    if rank == 0:
        save_record(out / "collectives.json", Collectives(
            world, dist.get_backend(), device.type, held, ring, copy, bandwidth))
        print(f"{world} ranks, {dist.get_backend()} on {device.type}: ring all-reduce "
              f"sent {ring.sent} bytes per rank; max difference from all_reduce "
              f"{ring.max_diff:.1e}")
        for name, rows in bandwidth.items():
            big = rows[-1]
            print(f"{name}: {big.bytes / 2**20:.0f} MiB all-reduce in "
                  f"{big.seconds * 1e3:.1f} ms, busbw {big.busbw:.2f} GB/s")


@record  # a crashing rank's traceback reaches torchrun's summary
def main(argv: list[str] | None = None) -> None:
    args = parse_args(__doc__, argv)
    device = setup(args.device)
    run(Path(args.out), device, args.max_kib, args.ring_numel)
    leave()


if __name__ == "__main__":
    main()
