"""torch.distributed.pipelining: a two-stage ResNet-14 run by ScheduleGPipe and 1F1B.

    torchrun --nproc-per-node=2 pipe_schedules.py --out D

Every rank builds the same seeded model and keeps one stage of it, wrapped in a
`PipelineStage`; a schedule cuts each batch into `--chunks` micro-batches and runs
the forwards, the backwards and the sends and receives between the ranks in its own
order. With `--device auto` and one GPU per rank it uses nccl, otherwise gloo on the
CPU (`--device cpu` forces that). For each schedule `check_and_time` runs one float64
step from zero gradients on the batch's first 2 images per micro-batch and saves its
gradients and logits to D/{schedule}_stage{rank}.pt, to check against the unsplit
model; then it times float32 steps on the whole batch and writes the medians to
D/schedules.json. Only torch and the standard library are used, so you can copy this
file into your project.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

SCHEDULES = {"GPipe": ScheduleGPipe, "1F1B": Schedule1F1B}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Read the command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="folder for the results")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--image", type=int, default=64, help="image height and width")
    p.add_argument("--chunks", type=int, default=4, help="micro-batches per batch")
    p.add_argument("--repeats", type=int, default=3, help="timed steps per schedule")
    p.add_argument("--device", choices=["auto", "cpu"], default="auto",
                   help="auto: nccl and one GPU per rank if there are enough, else CPU")
    p.add_argument("--threads", type=int,
                   default=int(os.environ.get("OMP_NUM_THREADS", "1")),
                   help="CPU threads per process")
    return p.parse_args(argv)


class Block(nn.Module):
    """A ResNet basic block: two 3x3 convolutions plus a shortcut, GroupNorm."""

    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.norm1 = nn.GroupNorm(8, cout)  # per sample: safe with micro-batches
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.norm2 = nn.GroupNorm(8, cout)
        self.shortcut = (nn.Identity() if stride == 1 and cin == cout else
                         nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                       nn.GroupNorm(8, cout)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Return relu(norm(conv(relu(norm(conv(x))))) + shortcut(x))."""
        out = F.relu(self.norm1(self.conv1(x)))
        return F.relu(self.norm2(self.conv2(out)) + self.shortcut(x))


def make_stages(num_classes: int = 10, seed: int = 0
                ) -> tuple[nn.Sequential, nn.Sequential]:
    """Build a seeded ResNet-14 (ResNet-18 without layer4), cut after layer1."""
    torch.manual_seed(seed)
    stem = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.GroupNorm(8, 64), nn.ReLU(),
            nn.MaxPool2d(3, 2, 1)]  # a quarter of the image side, 64 channels
    stage1 = nn.Sequential(*stem, Block(64, 64), Block(64, 64))
    stage2 = nn.Sequential(Block(64, 128, 2), Block(128, 128), Block(128, 256, 2),
                           Block(256, 256), nn.AdaptiveAvgPool2d(1), nn.Flatten(1),
                           nn.Linear(256, num_classes))
    return stage1, stage2


def join(args: argparse.Namespace) -> torch.device:
    """Join the group: nccl and one GPU per rank where there are enough, else gloo."""
    torch.set_num_threads(args.threads)
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", os.environ["WORLD_SIZE"]))
    gpus = torch.cuda.device_count()  # asks the driver; does not initialise CUDA
    if args.device == "auto" and gpus >= local_world:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)
        why = "nccl, one GPU per stage"
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
        why = ("gloo on the CPU (--device cpu)" if args.device == "cpu" else
               f"gloo on the CPU: {gpus} GPU(s) for {local_world} ranks")
    if dist.get_rank() == 0:
        print(why)
    if dist.get_world_size() != 2:
        raise SystemExit("run this script with exactly 2 processes, one per stage")
    return device


def make_step(schedule_cls: type, module: nn.Module, device: torch.device,
              chunks: int, x: torch.Tensor, y: torch.Tensor
              ) -> Callable[[], torch.Tensor | None]:
    """Wrap this rank's module in a PipelineStage; return a function for one step."""
    rank = dist.get_rank()
    stage = PipelineStage(module, stage_index=rank, num_stages=2, device=device)
    # the loss is a mean per micro-batch; the schedule divides the summed gradients by
    # the number of micro-batches (scale_grads=True), so they equal the full batch's
    schedule = schedule_cls(stage, n_microbatches=chunks, loss_fn=F.cross_entropy)

    def step() -> torch.Tensor | None:
        if rank == 0:
            return schedule.step(x)  # the first stage feeds the inputs
        return schedule.step(target=y)  # the last stage computes the loss
    return step


def median_seconds(step: Callable[[], object], device: torch.device,
                   repeats: int) -> float:
    """Return the median wall time of `step()` after one warm-up call."""
    def wait() -> None:  # GPU work is queued: wait until it has run
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    step()  # warm-up
    times = []
    for _ in range(repeats):
        wait()
        start = time.perf_counter()
        step()
        wait()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def check_and_time(out: Path, x: torch.Tensor, y: torch.Tensor, chunks: int,
                   repeats: int, device: torch.device) -> dict[str, float]:
    """Check each schedule in float64, then time it in float32; return the medians."""
    rank = dist.get_rank()
    module = make_stages()[rank].to(device)  # same seed: both stages of one model
    x, y = x.to(device), y.to(device)
    xc, yc = x[:2 * chunks].double(), y[:2 * chunks]  # float64 is slow: 2 per chunk
    for name, schedule_cls in SCHEDULES.items():  # float64: a check free of rounding
        module.double().zero_grad()
        logits = make_step(schedule_cls, module, device, chunks, xc, yc)()
        torch.save({"grads": [p.grad.cpu() for p in module.parameters()],
                    "logits": None if logits is None else logits.cpu()},
                   out / f"{name}_stage{rank}.pt")
    module.float()
    timings = {}
    for name, schedule_cls in SCHEDULES.items():
        step = make_step(schedule_cls, module, device, chunks, x, y)
        timings[name] = median_seconds(step, device, repeats)
        if rank == 0:
            print(f"{name:5s} with {chunks} micro-batches: "
                  f"{timings[name] * 1e3:.0f} ms/step")
    if rank == 0:
        (out / "schedules.json").write_text(json.dumps(timings))
    return timings


def main() -> None:
    """Join the group, check and time both schedules on one batch, leave."""
    args = parse_args()
    device = join(args)
    torch.manual_seed(1)
    x = torch.randn(args.batch, 3, args.image, args.image)  # synthetic images
    y = torch.randint(0, 10, (args.batch,))
    check_and_time(Path(args.out), x, y, args.chunks, args.repeats, device)
    dist.barrier()  # nobody leaves while the other rank still communicates
    dist.destroy_process_group()
    if device.type == "cpu":
        # Workaround for gloo, not part of pipelining: gloo frees the last messages'
        # tensors on its own threads, and a process that exits meanwhile can abort
        # ("terminate called without an active exception"). A short pause avoids it.
        time.sleep(0.2)


if __name__ == "__main__":
    main()
