"""Profile a few DDP training steps on every rank, and write each rank's trace.

    torchrun --standalone --nproc-per-node=2 step_profile.py --runs healthy tiny item

Each run trains ddp_parts.py's model with DDP under torch.profiler: one step
unrecorded (eleven on a GPU, where DDP synchronizes to time its first ten), one
warm-up step, then --steps recorded steps, each marked "ProfilerStep#N". Every
rank writes its Chrome trace to <out>/<run>_rank<R>.json (open it in Perfetto or
chrome://tracing). Two runs are slow on purpose:
- tiny: a per-rank batch of two 8x8 images, so a step is mostly per-operation
  overhead and the all-reduce's latency, not arithmetic (it records 4x the steps);
- item: a `loss.item()` every step. It copies one number to the host, so the host
  waits until the device has run everything queued before it (on a GPU, every step).
Notebook 17 reads the traces. Only torch and the standard library are used.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
import torch.distributed as dist
from ddp_parts import Net, make_data
from ddp_train import setup
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn import functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile, schedule
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

RUNS = ("healthy", "tiny", "item")
# The "tiny" run, per rank; its steps are short, so it records more of them.
TINY = {"batch": 2, "image_size": 8, "more_steps": 4}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Read the command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", nargs="+", choices=RUNS, default=list(RUNS))
    p.add_argument("--steps", type=int, default=4, help="recorded steps per run")
    p.add_argument("--batch", type=int, default=32, help="images per rank and step")
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--width", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--out", default="build/step_profile", help="folder for the traces")
    args = p.parse_args(argv)
    if min(args.steps, args.batch) < 1:
        p.error("--steps and --batch must be >= 1")
    return args


def profile_run(run: str, args: argparse.Namespace, device: torch.device) -> int:
    """Train `run` under the profiler, write its trace; return the steps recorded."""
    world, rank = dist.get_world_size(), dist.get_rank()
    steps = args.steps * (TINY["more_steps"] if run == "tiny" else 1)
    batch, size = (TINY["batch"], TINY["image_size"]) if run == "tiny" else (
        args.batch, args.image_size)
    skip = 10 if device.type == "cuda" else 0  # DDP syncs to time its first 10 steps
    data = make_data(batch * world * (2 + skip + steps), size, args.seed)
    sampler = DistributedSampler(data, shuffle=True, seed=args.seed)
    loader = DataLoader(data, batch_size=batch, sampler=sampler,
                        pin_memory=device.type == "cuda")
    torch.manual_seed(args.seed)
    net = Net(args.width).to(device)
    model = DDP(net, device_ids=[device.index] if device.type == "cuda" else None)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    path = Path(args.out) / f"{run}_rank{rank}.json"
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    plan = schedule(skip_first=skip, wait=1, warmup=1, active=steps, repeat=1)
    with profile(activities=activities, schedule=plan,
                 on_trace_ready=lambda p: p.export_chrome_trace(str(path))) as prof:
        for x, y in loader:
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if run == "item":
                loss.item()  # the planted host sync: a value the loop never needed
            prof.step()
    return steps


@record  # a crashing rank's traceback reaches torchrun's summary
def main(argv: list[str] | None = None) -> None:
    """Profile each run on every rank."""
    args = parse_args(argv)
    device = setup(args.device)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    for run in args.runs:
        steps = profile_run(run, args, device)
        dist.barrier()  # every rank's trace is written before the next run starts
        if dist.get_rank() == 0:
            print(f"{run}: {steps} steps recorded on each rank, in {args.out}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
