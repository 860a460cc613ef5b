"""Train a small CNN with DistributedDataParallel (DDP); start it with torchrun.

    torchrun --nproc-per-node=2 ddp_train.py --epochs 2

torchrun starts one process per rank and sets RANK, LOCAL_RANK and WORLD_SIZE.
Each process trains a full copy of the model on its own share of every global
batch (DistributedSampler); after each backward, DDP averages the gradients of
all processes, so every copy takes the same step and the copies stay identical.
With one GPU per process it uses nccl, otherwise gloo on the CPU. Any number of
processes works: when --batch-size does not split evenly, it is rounded down to
a multiple of the processes (and --accum), with a printed note. Lines marked
`# NEW` are what DDP adds to a single-process training script. Only torch and
the standard library are used, so you can copy this file into your project.

In practice: `torchrun --max-restarts=1 ... --resume` survives a crashed rank by
restarting from the last checkpoint; --val-samples evaluates on every rank and
counts each sample once; --amp bf16 trains under bfloat16 autocast.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import math
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Subset, TensorDataset
from torch.utils.data.distributed import DistributedSampler

WARMUP_STEPS = 2  # the first optimizer steps are not timed (allocation, caches)
# 2 gloo ranks vs 1 process on the full batch, in float32: the gradient is summed in
# another order, and a few dozen momentum steps amplify the rounding. Notebook 09 and
# tests/test_ddp_script.py both import this limit (per weight and per mean loss).
TOLERANCE = 1e-3


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Read the command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64,
                   help="global batch size per optimizer step, over all processes; "
                        "rounded down to a multiple of processes x --accum")
    p.add_argument("--samples", type=int, default=2048, help="training set size")
    p.add_argument("--image-size", type=int, default=32, help="side of the images")
    p.add_argument("--width", type=int, default=16, help="channels of the first conv")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--accum", type=int, default=1,
                   help="micro-batches per optimizer step (gradient accumulation)")
    p.add_argument("--bucket-cap-mb", type=float, default=25.0,
                   help="DDP all-reduces gradients in buckets of this size")
    p.add_argument("--threads", type=int,
                   default=int(os.environ.get("OMP_NUM_THREADS", "1")),
                   help="CPU threads per process")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="auto: one GPU per process if there are enough, else CPU")
    p.add_argument("--tf32", choices=["off", "on"], default="off",
                   help="TF32 for float32 matmuls and cuDNN convolutions on GPUs "
                        "(sets both allow_tf32 flags; no effect on the CPU)")
    p.add_argument("--amp", choices=["off", "bf16"], default="off",
                   help="bf16: run forward and loss under torch.autocast in bfloat16 "
                        "(CPU and GPU); weights, gradients and optimizer stay float32")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint", default="build/ddp_checkpoint.pt",
                   help="where rank 0 saves the model after each epoch")
    p.add_argument("--resume", action="store_true",
                   help="continue from --checkpoint if it exists (after a restart)")
    p.add_argument("--val-samples", type=int, default=0,
                   help="after training, evaluate on this many new samples, split "
                        "over the ranks, each counted once")
    p.add_argument("--dump", default=None,
                   help="rank 0 saves every rank's final weights, losses and timing")
    p.add_argument("--fail-rank", type=int, default=-1,
                   help="make this rank crash at step 2 (to see how a job fails)")
    p.add_argument("--fail-epoch", type=int, default=1,
                   help="the epoch (from 1) in which --fail-rank crashes")
    p.add_argument("--fail-once", action="store_true",
                   help="crash only in the first attempt, not after torchrun restarts")
    args = p.parse_args(argv)
    if min(args.epochs, args.batch_size, args.samples, args.accum, args.threads,
           args.fail_epoch) < 1 or args.val_samples < 0:
        p.error("--epochs, --batch-size, --samples, --accum, --threads and "
                "--fail-epoch must be >= 1, --val-samples >= 0")
    return args


def make_data(samples: int, size: int, seed: int) -> TensorDataset:
    """Return noisy images labelled by their brightest quadrant (4 classes)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, 1, size, size, generator=g)
    y = torch.randint(0, 4, (samples,), generator=g)
    h = size // 2
    for label, (r, c) in enumerate([(0, 0), (0, h), (h, 0), (h, h)]):
        x[y == label, :, r:r + h, c:c + h] += 0.3
    return TensorDataset(x, y)


class Net(nn.Module):
    """Three 3x3 convolutions and a linear head: much compute, few weights."""

    def __init__(self, width: int = 16, classes: int = 4):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1), nn.ReLU(),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(),
            nn.Conv2d(2 * width, 2 * width, 3, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(2),
        )
        self.head = nn.Linear(2 * width * 4, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


def setup(device: str = "auto") -> torch.device:
    """Join the process group torchrun describes; return this rank's device."""
    if "LOCAL_RANK" not in os.environ:
        raise SystemExit(f"start me with torchrun, e.g. torchrun --standalone "
                         f"--nproc-per-node=2 {os.path.basename(sys.argv[0])}")
    local_rank = int(os.environ["LOCAL_RANK"])  # this process's index on its machine
    local_world = int(os.environ["LOCAL_WORLD_SIZE"])  # processes on this machine
    if device == "auto":  # a GPU for every process on this machine, or none
        device = "cuda" if torch.cuda.device_count() >= local_world else "cpu"
    if device == "cuda":
        if local_rank >= torch.cuda.device_count():
            raise SystemExit(f"local rank {local_rank} has no GPU of its own: "
                             f"{torch.cuda.device_count()} visible on this machine")
        dev = torch.device("cuda", local_rank)
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", device_id=dev)  # binds the group to this GPU
        return dev
    dist.init_process_group("gloo")
    atexit.register(time.sleep, 0.2)  # workaround: gloo's threads finish freeing
    return torch.device("cpu")


def split_batch(batch: int, world: int, accum: int) -> tuple[int, str]:  # NEW
    """Return each process's micro-batch, and a note if the batch was rounded."""
    micro = max(1, batch // (world * accum))  # NEW
    used = micro * world * accum  # NEW
    if used == batch:  # NEW
        return micro, ""  # NEW
    return micro, (f"note: --batch-size {batch} does not split into {world} "  # NEW
                   f"process(es) x --accum {accum}; using {used} "
                   f"({micro} per process and micro-batch)")


def clock(device: torch.device) -> float:
    """Return perf_counter seconds once all queued work on `device` has finished."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


def train_epoch(model: nn.Module, loader: DataLoader, opt: torch.optim.Optimizer,
                accum: int, device: torch.device, fail: bool = False,
                amp: bool = False) -> tuple[torch.Tensor, list[float]]:
    """Train one epoch; return [summed loss, samples] and each step's milliseconds.

    A step accumulates `accum` micro-batches; the epoch's last step takes what is
    left, so no gradient leaks into the next epoch. `amp`: bf16 autocast.
    """
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
                loss = nn.functional.cross_entropy(model(x), y).float()
            (loss / parts).backward()  # DDP all-reduces the gradients here
        total[0] += loss.detach() * len(y)
        total[1] += len(y)
        if not last:
            continue
        opt.step()
        opt.zero_grad(set_to_none=True)
        now = clock(device)
        step_ms.append(1e3 * (now - t))
        t = now
        if fail and len(step_ms) == 2:
            raise RuntimeError(f"simulated crash on rank {dist.get_rank()} at step 2 "
                               "of this epoch")
    return total, step_ms


def flat_params(model: nn.Module) -> torch.Tensor:
    """Return all parameters as one flat vector."""
    return torch.cat([p.detach().flatten() for p in model.parameters()])


@record  # NEW: a crashing rank's traceback reaches torchrun's summary
def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.backends.cuda.matmul.allow_tf32 = args.tf32 == "on"  # PyTorch default: off
    torch.backends.cudnn.allow_tf32 = args.tf32 == "on"  # PyTorch default: on
    device = setup(args.device)  # NEW
    rank, world = dist.get_rank(), dist.get_world_size()  # NEW
    log = print if rank == 0 else (lambda *a, **k: None)  # NEW: rank 0 talks
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
    steps = math.ceil(len(loader) / args.accum)
    log(f"{world} process(es), {dist.get_backend()} on {device.type}, "  # NEW
        f"{args.threads} thread(s) each, TF32 {args.tf32}, AMP {args.amp}, "
        f"{micro * args.accum} samples per rank and step, {steps} steps per epoch")
    start, losses, step_ms = 0, [], []
    if args.resume:  # after a crash: continue from the last checkpoint
        start, losses = resume(args, model.module, opt, device, log)
    for epoch in range(start, args.epochs):
        sampler.set_epoch(epoch)  # NEW: a different shuffle every epoch
        fail = rank == args.fail_rank and epoch + 1 == args.fail_epoch and not (
            args.fail_once and attempt() > 0)
        total, ms = train_epoch(model, loader, opt, args.accum, device, fail,
                                amp=args.amp == "bf16")
        step_ms += ms
        dist.all_reduce(total)  # NEW: the loss over all ranks' samples
        losses.append((total[0] / total[1]).item())
        log(f"epoch {epoch + 1}/{args.epochs}: mean loss {losses[-1]:.4f}")
        if rank == 0:  # NEW: one process writes the checkpoint
            save({"model": model.module.state_dict(), "optimizer": opt.state_dict(),
                  "epoch": epoch, "step": (epoch + 1) * steps, "losses": losses},
                 Path(args.checkpoint))
            log(f"saved {args.checkpoint}")
        dist.barrier()  # NEW: nobody reads the checkpoint before it is complete
    timed = step_ms[WARMUP_STEPS:]  # training steps only: no checkpoint, no barrier
    median = statistics.median(timed) if timed else float("nan")
    log(f"{len(timed)} timed steps: median {median:.1f} ms per step")
    val = None
    if args.val_samples:  # on every rank: evaluate calls a collective
        val = evaluate(model.module, args, rank, world, device)
        log(f"validation: {val[0]}/{val[1]} right ({val[0] / val[1]:.1%}), "
            "each sample counted once")
    report(model, args, losses, timed, device,
           {"start_epoch": start, "start_step": start * steps, "val": val})
    leave_group()  # NEW


def attempt() -> int:
    """Return how often torchrun has restarted this job (0 on the first attempt)."""
    return int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))


def resume(args: argparse.Namespace, net: nn.Module, opt: torch.optim.Optimizer,
           device: torch.device, log) -> tuple[int, list[float]]:
    """Load --checkpoint if it exists; return the epoch to start from and the losses."""
    path = Path(args.checkpoint)
    if attempt():
        log(f"attempt {attempt() + 1}: torchrun restarted every rank")
    if not path.is_file():
        log(f"no checkpoint at {path}: starting from scratch")
        return 0, []
    ckpt = torch.load(path, map_location=device, weights_only=True)
    net.load_state_dict(ckpt["model"])  # every rank reads the same file: still equal
    opt.load_state_dict(ckpt["optimizer"])  # momentum too, or the next steps differ
    log(f"resumed from {path} at epoch {ckpt['epoch'] + 2}, after step {ckpt['step']}")
    return ckpt["epoch"] + 1, list(ckpt["losses"])


def evaluate(net: nn.Module, args: argparse.Namespace, rank: int, world: int,
             device: torch.device) -> tuple[int, int]:
    """Return (right, counted) over all ranks: each new sample is counted once."""
    data = make_data(args.val_samples, args.image_size, args.seed + 1)  # unseen
    mine = range(rank, len(data), world)  # NEW: no padding; shares may differ by one
    counts = torch.zeros(2, device=device)  # right, counted
    with torch.no_grad():  # net is model.module: DDP's forward may communicate
        for x, y in DataLoader(Subset(data, mine), batch_size=256):
            x, y = x.to(device), y.to(device)
            counts[0] += (net(x).argmax(1) == y).sum()
            counts[1] += len(y)
    dist.all_reduce(counts)  # NEW: one collective on every rank, whatever its share
    return int(counts[0]), int(counts[1])


def leave_group() -> None:  # NEW
    """Wait for every rank, then leave the process group."""
    dist.barrier()  # NEW: nobody leaves while the others still communicate
    dist.destroy_process_group()  # NEW


def save(checkpoint: dict, path: Path) -> None:
    """Write a checkpoint atomically: to a temporary file, then rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(checkpoint, tmp)
    tmp.replace(path)


def time_all_reduce(buffer: torch.Tensor, repeats: int = 20) -> float:
    """Return the median milliseconds of one all-reduce of `buffer` (after warm-up)."""
    times = []
    for _ in range(repeats + 3):
        t = clock(buffer.device)
        dist.all_reduce(buffer)
        times.append(clock(buffer.device) - t)
    return 1e3 * statistics.median(times[3:])


def report(model: nn.Module, args: argparse.Namespace, losses: list[float],
           step_ms: list[float], device: torch.device, extra: dict) -> None:
    """Gather every rank's weights on rank 0, check them, and optionally save them."""
    mine = flat_params(model)
    allreduce_ms = time_all_reduce(mine.clone())
    every = [torch.empty_like(mine) for _ in range(dist.get_world_size())]  # NEW
    dist.all_gather(every, mine)  # NEW: each rank sends its copy to all
    if dist.get_rank() != 0:
        return
    every = torch.stack(every).cpu()
    spread = (every - every[0]).abs().max().item()
    print(f"weights on all {len(every)} ranks identical: {spread == 0} "
          f"(max difference {spread:.1e})")
    print(f"one all-reduce of the {4 * mine.numel() / 1024:.0f} KiB of gradients: "
          f"median {allreduce_ms:.2f} ms")
    if args.dump:
        median = statistics.median(step_ms) if step_ms else float("nan")
        Path(args.dump).parent.mkdir(parents=True, exist_ok=True)
        torch.save({"params": every, "losses": losses, "step_ms": step_ms,
                    "median_ms": median, "seconds": sum(step_ms) / 1e3,
                    "steps": len(step_ms), "allreduce_ms": allreduce_ms,
                    "world_size": dist.get_world_size(), "threads": args.threads,
                    "tf32": args.tf32, "backend": dist.get_backend(),
                    "device": device.type, "amp": args.amp, "restarts": attempt(),
                    **extra}, args.dump)


if __name__ == "__main__":
    main()
