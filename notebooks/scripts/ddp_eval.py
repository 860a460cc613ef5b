"""Evaluate on every rank after training, counting each new sample exactly once.

    torchrun --standalone --nproc-per-node=2 ddp_eval.py --val-samples 101

ddp_train.py's training, then an evaluation on samples it never saw. Training
needs DistributedSampler's equal shares, padded with repeats: every rank must take
the same number of steps, each with an all-reduce. Evaluation needs one collective
at the end, so the shares may differ in length: rank r takes samples r, r + world,
..., counts its right answers and samples, and one all_reduce adds them up.
Notebook 10 runs it. Copy the whole folder, not this file: it imports ddp_train.py,
ddp_parts.py and common.py.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from common import leave, log, make_data
from ddp_parts import report
from ddp_train import build, fit, make_parser
from torch.distributed.elastic.multiprocessing.errors import record
from torch.utils.data import DataLoader, Dataset, Subset


def evaluate(net: torch.nn.Module, data: Dataset, rank: int, world: int,
             device: torch.device) -> tuple[int, int]:
    """Return (right, counted) over all ranks: each sample of `data` counted once."""
    mine = range(rank, len(data), world)  # no padding: shares may differ by one
    counts = torch.zeros(2, device=device)  # right, counted
    with torch.no_grad():  # net is model.module: DDP's forward may communicate
        for x, y in DataLoader(Subset(data, mine), batch_size=256):
            x, y = x.to(device), y.to(device)
            counts[0] += (net(x).argmax(1) == y).sum()
            counts[1] += len(y)
    dist.all_reduce(counts)  # one collective on every rank, whatever its share
    return int(counts[0]), int(counts[1])


@record  # a crashing rank's traceback reaches torchrun's summary
def main(argv: list[str] | None = None) -> None:
    p = make_parser()
    p.add_argument("--val-samples", type=int, default=1000, help="new samples")
    args = p.parse_args(argv)
    device, loader, model, opt = build(args)
    losses, step_ms = fit(args, model, opt, loader, device)
    new = make_data(args.val_samples, args.image_size, args.seed + 1)  # unseen
    right, counted = evaluate(model.module, new, dist.get_rank(),
                              dist.get_world_size(), device)
    log(f"validation: {right}/{counted} right ({right / counted:.1%}), each sample "
        "counted once")
    report(model, losses, step_ms, args.dump, amp=args.amp, val=(right, counted))
    leave()


if __name__ == "__main__":
    main()
