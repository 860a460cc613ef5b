"""DDP against one process on gpt.py's transformer: the time of a step (notebook 15).

    torchrun --standalone --nproc-per-node=2 gpt_ddp_timing.py --out build/gpt_ddp

Float32, timed in `--rounds` rounds that alternate DDP and one process alone (A B,
B A, ...), each `--round-steps` steps of step 0's global batch (the batch notebook
15's section 3 times, there under autocast on a GPU): a DDP step lasts until its
slowest rank ends it, so each round's DDP time is the slowest rank's; the one
process runs on rank 0 while the others wait. Rank 0 writes a `Timed` record to
OUT/ddp_time.json. Notebook 15 launches it through gpt_ddp_lessons.py. It imports
gpt_ddp.py (the step), gpt.py and common.py: copy the folder, not this file.
"""

import argparse
import dataclasses

import torch
import torch.distributed as dist
from common import clock, leave, save_record
from gpt import Config, batch
from gpt_ddp import build, counting_hook, ddp_step, join, parse_args, single_step
from torch.nn.parallel import DistributedDataParallel as DDP


@dataclasses.dataclass
class Timed:
    """What rank 0 writes to OUT/ddp_time.json: float32 rounds, DDP and one process."""

    device: str
    batch_size: int  # the global batch, in sequences
    block: int  # tokens per sequence
    rank_step_s: list[list[float]]  # per rank, seconds a step in each round
    ddp_step_s: list[float]  # per round: the slowest rank's
    single_step_s: list[float]  # per round: one process on the whole batch
    round_steps: int  # steps per round


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


def run(args: argparse.Namespace, device: torch.device, cfg: Config,
        data: torch.Tensor) -> Timed:
    """Time the rounds; rank 0 writes the record."""
    result = Timed(device=device.type, batch_size=args.batch_size, block=cfg.block,
                   **timed(cfg, args, device, data))
    if dist.get_rank() == 0:
        save_record(args.out / "ddp_time.json", result)
    return result


def main() -> None:
    args = parse_args(__doc__)
    run(args, *join(args))
    leave()


if __name__ == "__main__":
    main()
