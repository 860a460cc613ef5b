"""DDP's gradient buckets: what a comm hook sees under each bucket_cap_mb, and the time.

    torchrun --standalone --nproc-per-node=2 comm_buckets.py --out build/comm

DDP groups gradients into buckets of about bucket_cap_mb and all-reduces each one as
soon as it fills. For each --caps value a comm hook records the buckets it is handed
(GradBucket.index and bytes); then copies without a hook (DDP's own C++ all-reduce: a
Python hook would add its cost to every bucket) are timed in interleaved rounds.
Rank 0 writes one `Buckets` record to buckets.json. Notebook 11 runs it through
comm_lessons.py. Copy the whole folder, not this file: it imports common.py and
comm_model.py.
"""

from __future__ import annotations

import copy
import statistics
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from comm_model import batch, make_model, parse_args, train_step, wrap
from common import clock, leave, save_record, setup
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP


@dataclass
class Buckets:
    """What rank 0 writes to <out>/buckets.json (notebook 11 reads it)."""

    backend: str
    device: str
    param_bytes: list[int]  # each parameter's, in the model's order
    buckets: dict[str, list[list[int]]]  # by cap (MiB, as text): [index, bytes]
    step_seconds: dict[str, list[float]]  # by cap: each round's median step


def seen_buckets(model: DDP, x, y) -> list[tuple[int, int]]:
    """Return (GradBucket.index(), bytes) of every bucket in one backward."""
    seen = []

    def hook(state, bucket):  # no annotations: DDP checks them, and they are strings
        buf = bucket.buffer()  # this bucket's gradients, flattened into one tensor
        seen.append((bucket.index(), buf.numel() * buf.element_size()))
        return default_hooks.allreduce_hook(state, bucket)  # DDP's usual all-reduce

    model.register_comm_hook(None, hook)
    for _ in range(2):  # DDP rebuilds its buckets after the first backward
        seen.clear()
        nn.functional.mse_loss(model(x), y).backward()
    model.zero_grad(set_to_none=True)
    return seen[:]  # the hook stays (later steps use it too), its record stops here


def time_caps(models: dict[float, DDP], x, y, rounds: int, steps: int,
              device: torch.device) -> dict[float, list[float]]:
    """Return each cap's median step seconds per round; rounds interleave the caps."""
    opts = {cap: torch.optim.SGD(m.parameters(), lr=1e-3) for cap, m in models.items()}
    times: dict[float, list[float]] = {cap: [] for cap in models}
    for r in range(rounds):
        order = list(models) if r % 2 == 0 else list(models)[::-1]
        for cap in order:
            runs = []
            for i in range(steps + 1):  # one warm-up step
                dist.barrier()
                start = clock(device)
                train_step(models[cap], opts[cap], x, y)
                if i:
                    runs.append(clock(device) - start)
            times[cap].append(statistics.median(runs))
    return times


def run(args, device: torch.device) -> Buckets:
    """Record each cap's buckets, then time the caps; rank 0 writes the record."""
    base = make_model(args.layers, args.width)
    x, y = batch(args.width, args.batch, 0, device)
    caps = [float(c) for c in args.caps.split(",")]
    buckets = {cap: seen_buckets(wrap(copy.deepcopy(base), device, cap), x, y)
               for cap in caps}  # the hook stays on those copies: not timed
    models = {cap: wrap(copy.deepcopy(base), device, cap) for cap in caps}
    times = time_caps(models, x, y, args.rounds, args.steps, device)
    result = Buckets(dist.get_backend(), device.type,
                     [q.numel() * q.element_size() for q in base.parameters()],
                     {f"{c:g}": [list(b) for b in seen] for c, seen in buckets.items()},
                     {f"{c:g}": t for c, t in times.items()})
    if dist.get_rank() == 0:
        save_record(Path(args.out) / "buckets.json", result)
        print(f"{dist.get_world_size()} ranks, {dist.get_backend()} on {device.type}: "
              + ", ".join(f"bucket_cap_mb={c:g}: {len(b)} bucket(s)"
                          for c, b in buckets.items()))
    return result


@record  # a crashing rank's traceback reaches torchrun's summary
def main(argv: list[str] | None = None) -> None:
    args = parse_args(__doc__, argv)
    run(args, setup(args.device))
    leave()


if __name__ == "__main__":
    main()
