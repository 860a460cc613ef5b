"""All-reduce bandwidth by message size, as nccl-tests reports it.

    torchrun --standalone --nproc-per-node=4 comm_bandwidth.py --out build/comm

All-reduces from 1 KiB to --max-kib (64 MiB) are timed (medians) and written as the
nccl-tests report them: algbw = bytes / time, busbw = algbw x 2(N-1)/N, with one
rank's memory-copy bandwidth beside them. With one GPU per rank the default group is
nccl and a second, gloo group sweeps CPU tensors too. Rank 0 writes one `Bandwidth`
record to bandwidth.json. Notebook 11 runs it through comm_lessons.py. Copy the
whole folder, not this file: it imports common.py and comm_model.py.
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
class Row:
    """One size of the bandwidth sweep, as nccl-tests reports it."""

    bytes: int
    seconds: float  # median
    runs: list[float]
    algbw: float  # GB/s: bytes / seconds
    busbw: float  # GB/s: algbw x 2(N-1)/N


@dataclass
class Bandwidth:
    """What rank 0 writes to <out>/bandwidth.json (notebook 11 reads it)."""

    world: int
    memcpy_GBps: float  # one rank's host memory copy: gloo's ceiling
    sweeps: dict[str, list[Row]]  # by backend


def sweep_sizes(max_kib: int) -> list[int]:
    """Return the sweep's all-reduce sizes in bytes, from 1 KiB up to `max_kib` KiB."""
    sizes = [s for s in SIZES if s <= max_kib * KIB]
    if not sizes:
        raise ValueError(f"--max-kib {max_kib}: the sweep starts at 1 KiB")
    return sizes


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


def run(out: Path, device: torch.device, max_kib: int = 64 * KIB) -> None:
    """Sweep the sizes on every rank; rank 0 writes the record to `out`."""
    sizes = sweep_sizes(max_kib)
    groups = {dist.get_backend(): (device, None)}
    if device.type == "cuda":  # also gloo, on CPU tensors, in a second group
        groups["gloo"] = (torch.device("cpu"), dist.new_group(backend="gloo"))
    bandwidth = {name: sweep(dev, sizes, group) for name, (dev, group)
                 in groups.items()}
    # gloo's ranks pass data through host memory: its copy is their ceiling
    copy = memcpy_gbps(torch.device("cpu")) if dist.get_rank() == 0 else None
    if dist.get_rank() == 0:
        save_record(out / "bandwidth.json",
                    Bandwidth(dist.get_world_size(), copy, bandwidth))
        for name, rows in bandwidth.items():
            big = rows[-1]
            print(f"{name}: {big.bytes / 2**20:.0f} MiB all-reduce in "
                  f"{big.seconds * 1e3:.1f} ms, busbw {big.busbw:.2f} GB/s")


@record  # a crashing rank's traceback reaches torchrun's summary
def main(argv: list[str] | None = None) -> None:
    args = parse_args(__doc__, argv)
    device = setup(args.device)
    run(Path(args.out), device, args.max_kib)
    leave()


if __name__ == "__main__":
    main()
