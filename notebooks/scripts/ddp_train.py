"""Train a small CNN with DistributedDataParallel (DDP); start it with torchrun.

    torchrun --nproc-per-node=2 ddp_train.py --epochs 2

torchrun starts one process per rank and sets RANK, LOCAL_RANK and WORLD_SIZE.
Each process trains a full copy of the model on its own share of every global
batch (DistributedSampler); after each backward, DDP averages the gradients of
all processes, so every copy takes the same step and the copies stay identical.
With one GPU per process it uses nccl, otherwise gloo on the CPU. Lines marked
`# NEW` are what DDP adds to a single-process training script. Only torch and
the standard library are used, so you can copy this file into your project.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Read the command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64,
                   help="global batch size, split evenly over the processes")
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
    p.add_argument("--device", choices=["auto", "cpu"], default="auto",
                   help="auto: one GPU per process if there are enough, else CPU")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--checkpoint", default="build/ddp_checkpoint.pt",
                   help="where rank 0 saves the model after each epoch")
    p.add_argument("--dump", default=None,
                   help="rank 0 saves every rank's final weights, losses and timing")
    p.add_argument("--fail-rank", type=int, default=-1,
                   help="make this rank crash at step 2 (to see how a job fails)")
    return p.parse_args(argv)


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


def setup(device: str) -> tuple[int, int, torch.device]:  # NEW
    """Join the process group torchrun prepared; return rank, world size, device."""
    if "RANK" not in os.environ:  # NEW
        raise SystemExit("start me with torchrun, e.g. "
                         "torchrun --nproc-per-node=2 ddp_train.py")
    rank = int(os.environ["RANK"])  # NEW: 0 .. WORLD_SIZE-1 over all machines
    local_rank = int(os.environ["LOCAL_RANK"])  # NEW: index on this machine
    world = int(os.environ["WORLD_SIZE"])  # NEW
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))  # NEW
    gpus = torch.cuda.device_count() if device == "auto" else 0  # NEW
    if gpus >= local_world:  # NEW: one GPU for each process on this machine
        dev = torch.device("cuda", local_rank)  # NEW
        torch.cuda.set_device(dev)  # NEW: before any other CUDA call
        backend = "nccl"  # NEW
    else:  # NEW
        dev, backend = torch.device("cpu"), "gloo"  # NEW
    dist.init_process_group(backend)  # NEW: env:// reads MASTER_ADDR/PORT from torchrun
    atexit.register(pause_at_exit)  # NEW
    return rank, world, dev  # NEW


def flat_params(model: nn.Module) -> torch.Tensor:
    """Return all parameters as one flat vector."""
    return torch.cat([p.detach().flatten() for p in model.parameters()])


@record  # NEW: a crashing rank's traceback reaches torchrun's summary
def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    rank, world, device = setup(args.device)  # NEW
    log = print if rank == 0 else (lambda *a, **k: None)  # NEW: rank 0 talks
    if args.batch_size % (world * args.accum):  # NEW
        raise SystemExit(f"--batch-size {args.batch_size} must divide by "
                         f"{world} processes x --accum {args.accum}")
    micro = args.batch_size // (world * args.accum)  # NEW: this rank's micro-batch
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
        f"{args.threads} thread(s) each, {micro * args.accum} samples per rank "
        f"and step, {len(loader) // args.accum} steps per epoch")
    losses, step, t0 = [], 0, None
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)  # NEW: a different shuffle every epoch
        total = torch.zeros(2, device=device)  # summed loss, samples
        for i, (x, y) in enumerate(loader):
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            last = (i + 1) % args.accum == 0
            sync = contextlib.nullcontext() if last else model.no_sync()  # NEW
            with sync:  # NEW: all-reduce only on the last micro-batch of a step
                loss = nn.functional.cross_entropy(model(x), y)
                (loss / args.accum).backward()  # DDP all-reduces grads here
            total[0] += loss.detach() * len(y)
            total[1] += len(y)
            if not last:
                continue
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            if step == 2 and rank == args.fail_rank:
                raise RuntimeError(f"simulated crash on rank {rank} at step {step}")
            if step == 3:  # time what follows the warm-up steps
                dist.barrier()  # NEW
                t0 = time.perf_counter()
        dist.all_reduce(total)  # NEW: the loss over all ranks' samples
        losses.append((total[0] / total[1]).item())
        log(f"epoch {epoch + 1}/{args.epochs}: mean loss {losses[-1]:.4f}")
        if rank == 0:  # NEW: one process writes the checkpoint
            save(model.module.state_dict(), opt, epoch, Path(args.checkpoint))
            log(f"saved {args.checkpoint}")
        dist.barrier()  # NEW: nobody reads the checkpoint before it is complete
    seconds = time.perf_counter() - t0 if t0 is not None else float("nan")
    log(f"{step - 3} timed steps: {1e3 * seconds / max(step - 3, 1):.1f} ms per step")
    report(model, args, losses, seconds, step - 3, device)
    leave_group()  # NEW


def leave_group() -> None:  # NEW
    """Wait for every rank, then leave the process group."""
    dist.barrier()  # NEW: nobody leaves while the others still communicate
    dist.destroy_process_group()  # NEW


def pause_at_exit() -> None:
    """Give gloo's threads a moment to free their last tensors before Python exits.

    They free the tensors of the last collectives just after those complete; if
    Python is already shutting down by then, the process aborts ("terminate called
    without an active exception"). `atexit` runs this on success and on error alike.
    """
    time.sleep(0.2)


def save(state: dict, opt: torch.optim.Optimizer, epoch: int, path: Path) -> None:
    """Write a checkpoint atomically: to a temporary file, then rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save({"model": state, "optimizer": opt.state_dict(), "epoch": epoch}, tmp)
    tmp.replace(path)


def time_all_reduce(buffer: torch.Tensor, repeats: int = 20) -> float:
    """Return the median milliseconds of one all-reduce of `buffer` (after warm-up)."""
    times = []
    for _ in range(repeats + 3):
        if buffer.is_cuda:
            torch.cuda.synchronize()
        t = time.perf_counter()
        dist.all_reduce(buffer)
        if buffer.is_cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    return 1e3 * sorted(times[3:])[repeats // 2]


def report(model: nn.Module, args: argparse.Namespace, losses: list[float],
           seconds: float, steps: int, device: torch.device) -> None:
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
          f"{allreduce_ms:.2f} ms")
    if args.dump:
        Path(args.dump).parent.mkdir(parents=True, exist_ok=True)
        torch.save({"params": every, "losses": losses, "seconds": seconds,
                    "steps": steps, "allreduce_ms": allreduce_ms,
                    "world_size": dist.get_world_size(), "threads": args.threads,
                    "backend": dist.get_backend(), "device": device.type}, args.dump)


if __name__ == "__main__":
    main()
