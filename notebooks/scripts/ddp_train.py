"""Train a small CNN with DistributedDataParallel (DDP); start it with torchrun.

    torchrun --standalone --nproc-per-node=2 ddp_train.py --epochs 2

torchrun starts one process per rank and sets RANK, LOCAL_RANK and WORLD_SIZE. Each
process trains a copy of the model on its share of every global batch; in backward
DDP averages the gradients of all processes, so every copy takes the same step. One
GPU per process uses nccl, else gloo on the CPU. Lines marked `# NEW` are what DDP
adds to a single-process script. common.py joins the group (`setup`), ddp_parts.py
the checkpoint and report; ddp_resume.py (survive a crashed rank) and ddp_eval.py
(evaluate on every rank) build on this file. Notebook 09 runs it (and 18 times it).
Copy the whole folder, not this file.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
from pathlib import Path

import torch
import torch.distributed as dist
from common import Net, clock, leave, log, make_data, setup
from ddp_parts import report, save
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

WARMUP_STEPS = 2  # the first optimizer steps are not timed (allocation, caches)
# 2 gloo ranks vs 1 process on the full batch, in float32: the gradient is summed in
# another order, and a few dozen momentum steps amplify the rounding. Notebook 09 and
# tests/test_ddp_script.py both import this limit (per weight and per mean loss).
TOLERANCE = 1e-3


def make_parser() -> argparse.ArgumentParser:
    """Return the command line's options; ddp_resume.py and ddp_eval.py add theirs."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for flag, default in [("--epochs", 2), ("--samples", 2048), ("--image-size", 32),
                          ("--width", 16), ("--seed", 0),
                          ("--batch-size", 64),  # global: over all processes
                          ("--accum", 1)]:  # micro-batches per optimizer step
        p.add_argument(flag, type=int, default=default)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--bucket-cap-mb", type=float, default=25.0)  # DDP's bucket size
    p.add_argument("--threads", type=int, default=int(os.environ.get(
        "OMP_NUM_THREADS", "1")), help="CPU threads per process")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--tf32", choices=["off", "on"], default="off")  # GPUs only
    p.add_argument("--amp", choices=["off", "bf16"], default="off")  # autocast
    p.add_argument("--checkpoint", default="build/ddp_checkpoint.pt")
    p.add_argument("--dump", default=None, help="rank 0 saves a Report here (.pt)")
    return p


def split_batch(batch: int, world: int, accum: int) -> tuple[int, str]:  # NEW
    """Return each process's micro-batch, and a note if the batch was rounded down."""
    micro = max(1, batch // (world * accum))  # NEW
    used = micro * world * accum  # NEW
    return micro, "" if used == batch else (  # NEW
        f"note: --batch-size {batch} does not split into {world} process(es) x "
        f"--accum {accum}; using {used} ({micro} per process and micro-batch)")


def build(args: argparse.Namespace) -> tuple[torch.device, DataLoader, DDP,
                                             torch.optim.Optimizer]:
    """Join the group; return the device, this rank's loader, model and optimizer."""
    torch.set_num_threads(args.threads)
    on = args.tf32 == "on"  # TF32 on GPUs; PyTorch's defaults: matmul off, cuDNN on
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = on
    device = setup(args.device)  # NEW
    rank, world = dist.get_rank(), dist.get_world_size()  # NEW
    micro, note = split_batch(args.batch_size, world, args.accum)  # NEW
    if note:  # NEW
        log(note)  # NEW
    data = make_data(args.samples, args.image_size, args.seed)
    sampler = DistributedSampler(data, world, rank, shuffle=True, seed=args.seed)  # NEW
    loader = DataLoader(data, batch_size=micro, sampler=sampler,  # NEW: not shuffle
                        pin_memory=device.type == "cuda")
    torch.manual_seed(args.seed)
    model = DDP(Net(args.width).to(device),  # NEW: broadcasts rank 0's weights
                device_ids=[device.index] if device.type == "cuda" else None,  # NEW
                bucket_cap_mb=args.bucket_cap_mb, gradient_as_bucket_view=True)  # NEW
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    log(f"{world} process(es), {dist.get_backend()} on {device.type}, "  # NEW
        f"{args.threads} thread(s) each, TF32 {args.tf32}, AMP {args.amp}, "
        f"{micro * args.accum} samples per rank and step, "
        f"{math.ceil(len(loader) / args.accum)} steps per epoch")
    return device, loader, model, opt


def train_epoch(model: DDP, loader: DataLoader, opt: torch.optim.Optimizer,
                accum: int, device: torch.device,
                amp: bool = False) -> tuple[torch.Tensor, list[float]]:
    """Train one epoch of steps of `accum` micro-batches (the last step takes what is
    left); return [summed loss, samples] and each step's milliseconds."""
    total = torch.zeros(2, device=device)  # summed loss, samples
    step_ms, n, t = [], len(loader), clock(device)
    for i, (x, y) in enumerate(loader):
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        first = i - i % accum  # this step's first micro-batch
        parts = min(accum, n - first)  # micro-batches in this step (fewer at the end)
        last = i == first + parts - 1
        sync = contextlib.nullcontext() if last else model.no_sync()  # NEW
        with sync:  # NEW: all-reduce only on the last micro-batch of a step
            with torch.autocast(device.type, torch.bfloat16, enabled=amp):
                loss = torch.nn.functional.cross_entropy(model(x), y).float()
            (loss / parts).backward()  # DDP all-reduces the gradients here
        total[0] += loss.detach() * len(y)
        total[1] += len(y)
        if last:
            opt.step()
            opt.zero_grad(set_to_none=True)
            now = clock(device)
            step_ms.append(1e3 * (now - t))
            t = now
    return total, step_ms


def fit(args: argparse.Namespace, model: DDP, opt: torch.optim.Optimizer,
        loader: DataLoader, device: torch.device, start: int = 0,
        losses: tuple[float, ...] = ()) -> tuple[list[float], list[float]]:
    """Train from epoch `start`, checkpointing each; return every epoch's mean loss
    and the milliseconds of each timed step."""
    losses, step_ms = list(losses), []
    steps = math.ceil(len(loader) / args.accum)
    for epoch in range(start, args.epochs):
        loader.sampler.set_epoch(epoch)  # NEW: a different shuffle every epoch
        total, ms = train_epoch(model, loader, opt, args.accum, device,
                                amp=args.amp == "bf16")
        step_ms += ms
        dist.all_reduce(total)  # NEW: the loss over all ranks' samples
        losses.append((total[0] / total[1]).item())
        log(f"epoch {epoch + 1}/{args.epochs}: mean loss {losses[-1]:.4f}")
        if dist.get_rank() == 0:  # NEW: one process writes the checkpoint
            save({"model": model.module.state_dict(), "optimizer": opt.state_dict(),
                  "epoch": epoch, "step": (epoch + 1) * steps, "losses": losses},
                 Path(args.checkpoint))
            log(f"saved {args.checkpoint}")
        dist.barrier()  # NEW: nobody reads the checkpoint before it is complete
    return losses, step_ms[WARMUP_STEPS:]  # no checkpoint, no barrier: steps only


@record  # NEW: a crashing rank's traceback reaches torchrun's summary
def main(argv: list[str] | None = None) -> None:
    args = make_parser().parse_args(argv)
    device, loader, model, opt = build(args)
    losses, step_ms = fit(args, model, opt, loader, device)
    report(model, losses, step_ms, args.dump, amp=args.amp)
    leave()  # NEW: common.leave waits for every rank, then leaves the group


if __name__ == "__main__":
    main()
