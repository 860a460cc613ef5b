"""DDP on gpt.py's transformer, with gradient accumulation under no_sync (notebook 15).

    torchrun --standalone --nproc-per-node=2 gpt_ddp.py --out build/gpt_ddp

In float64, every rank takes its chunk of each global batch, runs `--accum`
micro-batches (all but the last under `no_sync()`, each loss divided by the count) and
steps; a hook counts what DDP all-reduces in each micro-batch. Rank 0 also trains one
process on the whole global batch, and compares the weights. Rank 0 writes an
`Accumulated` record to OUT/ddp.json. Notebook 15 launches it through
gpt_ddp_lessons.py, with gpt_ddp_timing.py in the same processes. It imports gpt.py
(the model) and common.py: copy the folder, not this file.
"""


import argparse
import contextlib
import dataclasses
from pathlib import Path

import torch
import torch.distributed as dist
from common import full_state, leave, log, max_diff, save_record, setup
from gpt import GPT, Config, batch, corpus, init_weights, loss_fn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP


@dataclasses.dataclass
class Accumulated:
    """What rank 0 writes to OUT/ddp.json: float64 steps, DDP against one process."""

    world: int
    device: str
    backend: str
    accum: int  # micro-batches per step
    batch_size: int  # the global batch, in sequences
    block: int  # tokens per sequence
    allreduce_calls: list[list[int]]  # float64: per step, per micro-batch
    elements_reduced: list[int]  # float64: values all-reduced per step
    max_diff_single: float | None  # float64: DDP vs one process (rank 0's)


def counting_hook(state: dict,
                  bucket: dist.GradBucket) -> torch.futures.Future[torch.Tensor]:
    """All-reduce a bucket as DDP does by default, and count it.

    DDP checks both annotations, so this file has no `from __future__ import
    annotations` (it would turn them into strings).
    """
    state["calls"] += 1
    state["elements"] += bucket.buffer().numel()
    return default_hooks.allreduce_hook(None, bucket)  # average over the ranks


def ddp_step(model: DDP, opt, x, y, accum: int, counter: dict) -> list[int]:
    """Run one optimizer step of `accum` micro-batches; return all-reduces per each."""
    calls = []
    for i, (xm, ym) in enumerate(zip(x.chunk(accum), y.chunk(accum), strict=True)):
        before = counter["calls"]
        last = i == accum - 1
        with contextlib.nullcontext() if last else model.no_sync():  # NEW: skip the sum
            (loss_fn(model(xm), ym) / accum).backward()  # NEW: / accum, so grads add up
        calls.append(counter["calls"] - before)  # to the global batch's mean
    opt.step()
    opt.zero_grad(set_to_none=True)
    return calls


def single_step(model, opt, x, y) -> None:
    loss_fn(model(x), y).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def build(cfg: Config, dtype: torch.dtype, device: torch.device):
    model = GPT(cfg).to(device=device, dtype=dtype)
    init_weights(model, seed=0)  # the same weights on every rank and layout
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3)


def accumulate(cfg: Config, args, dtype: torch.dtype, device: torch.device,
               steps: int, data: torch.Tensor) -> dict:
    """Train `steps` steps with DDP and, on rank 0, one process; compare the weights."""
    rank, world = dist.get_rank(), dist.get_world_size()
    model, opt = build(cfg, dtype, device)
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    counter = {"calls": 0, "elements": 0}
    ddp.register_comm_hook(counter, counting_hook)
    calls, elements = [], []
    for step in range(steps):
        x, y = (t.chunk(world)[rank].to(device)  # this rank's rows of the global batch
                for t in batch(data, step, args.batch_size, cfg.block))
        counter["elements"] = 0
        calls.append(ddp_step(ddp, opt, x, y, args.accum, counter))
        elements.append(counter["elements"])
    out = {"allreduce_calls": calls, "elements_reduced": elements,
           "max_diff_single": None}
    if rank == 0:  # one process, the whole global batch at once, no accumulation
        single, opt1 = build(cfg, dtype, device)
        for step in range(steps):
            x, y = (t.to(device) for t in batch(data, step, args.batch_size, cfg.block))
            single_step(single, opt1, x, y)
        out["max_diff_single"] = max_diff(full_state(model), full_state(single))
    dist.barrier()
    return out


def parse_args(doc: str, argv: list[str] | None = None) -> argparse.Namespace:
    """Read the options of this script and gpt_ddp_timing.py; check them."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("build/gpt_ddp"),
                        help="folder for the records")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--batch-size", type=int, default=16, help="the global batch")
    parser.add_argument("--accum", type=int, default=2, help="micro-batches per step")
    parser.add_argument("--steps", type=int, default=3, help="float64 steps compared")
    parser.add_argument("--rounds", type=int, default=5, help="float32 timed rounds")
    parser.add_argument("--round-steps", type=int, default=4, help="steps per round")
    parser.add_argument("--dim", type=int, default=Config.dim)
    parser.add_argument("--layers", type=int, default=Config.layers)
    args = parser.parse_args(argv)
    if min(args.steps, args.rounds, args.round_steps) < 1:
        parser.error("--steps, --rounds and --round-steps must be at least 1")
    return args


def join(args: argparse.Namespace) -> tuple[torch.device, Config, torch.Tensor]:
    """Join the group; check that the batch splits; return device, model, text."""
    device = setup(args.device)
    if args.batch_size % (dist.get_world_size() * args.accum):
        raise SystemExit(f"--batch-size {args.batch_size} must split into "
                         f"{dist.get_world_size()} ranks x {args.accum} micro-batches")
    return device, Config(dim=args.dim, layers=args.layers), corpus()


def run(args: argparse.Namespace, device: torch.device, cfg: Config,
        data: torch.Tensor) -> Accumulated:
    """Compare DDP with one process in float64; rank 0 writes the record."""
    result = Accumulated(world=dist.get_world_size(), device=device.type,
                         backend=dist.get_backend(), accum=args.accum,
                         batch_size=args.batch_size, block=cfg.block,
                         **accumulate(cfg, args, torch.float64, device, args.steps,
                                      data))
    if dist.get_rank() == 0:
        save_record(args.out / "ddp.json", result)
        log(f"{result.world} ranks, {result.backend} on {device.type}: DDP with "
            f"{args.accum} micro-batches vs one process: float64 max |diff| "
            f"{result.max_diff_single:.1e}")
    return result


def main() -> None:
    args = parse_args(__doc__)
    run(args, *join(args))
    leave()


if __name__ == "__main__":
    main()
