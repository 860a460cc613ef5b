"""Profile a few DDP training steps on every rank, and write each rank's trace.

    torchrun --standalone --nproc-per-node=2 prof_step.py --runs healthy tiny item

Lesson: where a DDP step's time goes, rank by rank (notebook 18 runs it). Each run
trains common.py's `Net` (the ddp_ scripts' model) with DDP under torch.profiler: one
step unrecorded (eleven on a GPU, where DDP synchronizes to time its first ten), one
warm-up step, then --steps recorded steps, each marked "ProfilerStep#N". Every rank
writes its Chrome trace to <out>/<run>_rank<R>.json (open it in Perfetto or
chrome://tracing). Two runs are slow on purpose:
- tiny: a per-rank batch of two 8x8 images, so a step is mostly per-operation
  overhead and the all-reduce's latency, not arithmetic (it records 4x the steps);
- item: a `loss.item()` every step. It copies one number to the host, so the host
  waits until the device has run everything queued before it (on a GPU, every step).
step_breakdown() reads the traces back (with prof_traces.py) and splits each recorded
step into PARTS; notebook 18 prints them. Copy the whole folder, not this file: it
imports common.py and prof_traces.py.
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import torch
import torch.distributed as dist
from common import Net, make_data, setup
from prof_traces import complete_events
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
    p.add_argument("--out", default="build/prof_step", help="folder for the traces")
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


# --- Where a recorded step's time went ----------------------------------------------
# Each instant of a step counts once, as the first of PARTS that applies (_kind).
PARTS = ("sync", "data", "compute", "comm", "other")
FIXES = {"sync": "drop the per-step .item(): log every N steps",
         "data": "feed it faster: DataLoader workers, pin_memory",
         "comm": "a bigger per-rank batch, or no_sync: fewer all-reduces",
         "other": "a bigger per-rank batch, or fewer, larger kernels (notebook 07)"}
_DEVICE = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})  # what the GPU itself runs


def _kind(e: dict, gpu: bool) -> str:
    """Return an event's part: host sync, DataLoader wait, compute (GPU kernels, or
    CPU operators in a CPU-only trace), gloo/nccl communication, or "" for none."""
    name, cat = str(e.get("name", "")), e.get("cat")
    if name.startswith(("gloo:", "c10d::")) or "nccl" in name.lower():
        return "comm"
    if name in ("aten::item", "aten::_local_scalar_dense") or (
            cat == "cuda_runtime" and "Synchronize" in name):
        return "sync"
    return "data" if name.startswith("enumerate(DataLoader)") else (
        "compute" if cat in (_DEVICE if gpu else {"cpu_op"}) else "")


def _covered(spans: list[tuple[float, float]]) -> float:
    """Return the length of the union of (start, end) spans."""
    total, end = 0.0, -math.inf
    for lo, hi in sorted(spans):
        total, end = total + max(0.0, hi - max(lo, end)), max(end, hi)
    return total


def step_parts(trace: Any) -> list[dict[str, float]]:
    """Return each "ProfilerStep#N" of a Chrome trace (dict or file) as {part: us}."""
    raw = complete_events(trace)
    gpu = any(e.get("cat") in _DEVICE for e in raw)
    spans: dict[str, list] = {k: [] for k in (*PARTS, "")}
    for e in raw:
        spans[_kind(e, gpu)].append((float(e["ts"]), float(e["ts"]) + float(e["dur"])))
    rows = []
    for e in raw:
        if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"):
            lo, hi = float(e["ts"]), float(e["ts"]) + float(e["dur"])
            clip = [[(max(a, lo), min(b, hi)) for a, b in spans[k] if a < hi and b > lo]
                    for k in PARTS[:-1]]
            edges = [0.0, *(_covered(sum(clip[:i], [])) for i in (1, 2, 3, 4)), hi - lo]
            rows.append({p: edges[i + 1] - edges[i] for i, p in enumerate(PARTS)})
    return rows


class StepBreakdown(NamedTuple):
    """A step's mean ms per part (summing to `step`), each rank's compute share."""

    step: float
    parts: dict[str, float]
    shares: list[float]


def step_breakdown(traces: Sequence[Any]) -> StepBreakdown:
    """Split each "ProfilerStep#N" of each rank's trace into PARTS."""
    ranks = [step_parts(t) for t in traces]
    if not ranks or not all(ranks):
        raise ValueError("a trace has no ProfilerStep#N: profile with a schedule and "
                         "call prof.step() after every step")
    rows = [r for steps in ranks for r in steps]
    parts = {p: statistics.fmean(r[p] for r in rows) / 1e3 for p in PARTS}
    shares = [sum(r["compute"] for r in s) / sum(sum(r.values()) for r in s)
              for s in ranks]
    return StepBreakdown(sum(parts.values()), parts, shares)


if __name__ == "__main__":
    main()
