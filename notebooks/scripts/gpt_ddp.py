"""DDP on gpt.py's transformer, with gradient accumulation under no_sync (notebook 15).

    torchrun --standalone --nproc-per-node=2 gpt_ddp.py --out build/gpt_ddp.json

In float64, every rank takes its chunk of each global batch, runs `--accum`
micro-batches (all but the last under `no_sync()`, each loss divided by the count) and
steps; a hook counts what DDP all-reduces in each micro-batch. Rank 0 also trains one
process on the whole global batch, and compares the weights. Then float32, timed in
`--rounds` rounds that alternate DDP and one process alone (A B, B A, ...), each
`--round-steps` steps of step 0's global batch (the batch notebook 15's section 3 times,
there under autocast on a GPU): a DDP step lasts until its slowest rank ends it, so each
round's DDP time is the slowest rank's; the one process runs on rank 0 while the others
wait. Rank 0 writes a `Trained` record to --out.

Notebook 15 launches it. It imports gpt.py (the model) and common.py: copy the folder,
not this file.
"""


import argparse
import contextlib
import dataclasses
from pathlib import Path

import torch
import torch.distributed as dist
from common import clock, full_state, leave, log, max_diff, save_record, setup
from gpt import GPT, Config, batch, corpus, init_weights, loss_fn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP


@dataclasses.dataclass
class Trained:
    """What the launch showed: float64 steps compared, then float32 rounds timed."""

    world: int
    device: str
    backend: str
    accum: int  # micro-batches per step
    batch_size: int  # the global batch, in sequences
    block: int  # tokens per sequence
    allreduce_calls: list[list[int]]  # float64: per step, per micro-batch
    elements_reduced: list[int]  # float64: values all-reduced per step
    max_diff_single: float | None  # float64: DDP vs one process (rank 0's)
    rank_step_s: list[list[float]]  # float32: per rank, seconds a step in each round
    ddp_step_s: list[float]  # per round: the slowest rank's
    single_step_s: list[float]  # per round: one process on the whole batch
    round_steps: int  # steps per round


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


def run(cfg: Config, args, dtype: torch.dtype, device: torch.device, steps: int,
        data: torch.Tensor) -> dict:
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


def _seconds(fn, steps: int, device: torch.device) -> float:
    """Return the wall seconds per call of `steps` calls of fn, synchronised."""
    start = clock(device)
    for _ in range(steps):
        fn()
    return (clock(device) - start) / steps


def timed(cfg: Config, args, device: torch.device, data: torch.Tensor) -> dict:
    """Time float32 DDP and one process in alternating rounds; seconds per step."""
    rank, world = dist.get_rank(), dist.get_world_size()
    model, opt = build(cfg, torch.float32, device)
    ddp = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    counter = {"calls": 0, "elements": 0}
    ddp.register_comm_hook(counter, counting_hook)
    x, y = batch(data, 0, args.batch_size, cfg.block)  # one global batch, every step
    xr, yr = x.chunk(world)[rank].to(device), y.chunk(world)[rank].to(device)
    if rank == 0:
        single, opt1 = build(cfg, torch.float32, device)
        xs, ys = x.to(device), y.to(device)

    def ddp_round() -> list[float]:
        dist.barrier()  # every rank starts the round together
        mine = _seconds(lambda: ddp_step(ddp, opt, xr, yr, args.accum, counter),
                        args.round_steps, device)
        by_rank = [None] * world
        dist.all_gather_object(by_rank, mine)
        return by_rank

    def single_round() -> float:
        dist.barrier()
        mine = _seconds(lambda: single_step(single, opt1, xs, ys), args.round_steps,
                        device) if rank == 0 else 0.0
        seconds = [mine]
        dist.broadcast_object_list(seconds, src=0)  # the others wait here
        return seconds[0]

    ddp_round(), single_round()  # warm-up: first calls allocate and pick kernels
    ranks, single_s = [], []
    for i in range(args.rounds):  # A B, B A, ...: a drifting load slows both alike
        if i % 2:
            single_s.append(single_round())
            ranks.append(ddp_round())
        else:
            ranks.append(ddp_round())
            single_s.append(single_round())
    return {"rank_step_s": [list(r) for r in zip(*ranks, strict=True)],
            "ddp_step_s": [max(r) for r in ranks], "single_step_s": single_s,
            "round_steps": args.round_steps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("build/gpt_ddp.json"))
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    parser.add_argument("--batch-size", type=int, default=16, help="the global batch")
    parser.add_argument("--accum", type=int, default=2, help="micro-batches per step")
    parser.add_argument("--steps", type=int, default=3, help="float64 steps compared")
    parser.add_argument("--rounds", type=int, default=5, help="float32 timed rounds")
    parser.add_argument("--round-steps", type=int, default=4, help="steps per round")
    parser.add_argument("--dim", type=int, default=Config.dim)
    parser.add_argument("--layers", type=int, default=Config.layers)
    args = parser.parse_args()
    device = setup(args.device)
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch_size % (world * args.accum):
        raise SystemExit(f"--batch-size {args.batch_size} must split into {world} "
                         f"ranks x {args.accum} micro-batches")
    if min(args.steps, args.rounds, args.round_steps) < 1:
        raise SystemExit("--steps, --rounds and --round-steps must be at least 1")
    cfg, data = Config(dim=args.dim, layers=args.layers), corpus()
    result = Trained(world=world, device=device.type, backend=dist.get_backend(),
                     accum=args.accum, batch_size=args.batch_size, block=cfg.block,
                     **run(cfg, args, torch.float64, device, args.steps, data),
                     **timed(cfg, args, device, data))
    if rank == 0:
        save_record(args.out, result)
        log(f"{world} ranks, {dist.get_backend()} on {device.type}: DDP with "
            f"{args.accum} micro-batches vs one process: float64 max |diff| "
            f"{result.max_diff_single:.1e}")
    leave()


if __name__ == "__main__":
    main()
