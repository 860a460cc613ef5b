"""Survive a crashed rank: torchrun restarts the job, which resumes from a checkpoint.

    torchrun --standalone --nproc-per-node=2 --max-restarts=1 ddp_resume.py \\
        --fail-rank 1 --fail-epoch 2 --fail-once

ddp_train.py's training, plus a planted crash and the resume. --fail-rank makes one
rank raise at step 2 of --fail-epoch (with --fail-once, in the first attempt only):
a stand-in for a node that reboots or a GPU that drops out. torchrun's
--max-restarts=N then stops every rank and starts them all again, up to N times;
each attempt sees TORCHELASTIC_RESTART_COUNT = 0, 1, .... A restart runs the script
from the top, so `resume` loads the last checkpoint (the model, the optimizer's
momentum, the epoch) and training goes on from there. Notebook 10 runs it. Copy the
whole folder, not this file: it imports ddp_train.py, ddp_parts.py and common.py.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import torch
import torch.distributed as dist
from common import leave, log
from ddp_parts import report
from ddp_train import build, fit, make_parser
from torch.distributed.elastic.multiprocessing.errors import record


def attempt() -> int:
    """Return how often torchrun has restarted this job (0 on the first attempt)."""
    return int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))


def resume(path: Path, net: torch.nn.Module, opt: torch.optim.Optimizer,
           device: torch.device, say=log) -> tuple[int, list[float]]:
    """Load the checkpoint at `path` if there is one; return the epoch to start from
    and the losses so far."""
    if attempt():
        say(f"attempt {attempt() + 1}: torchrun restarted every rank")
    if not path.is_file():
        say(f"no checkpoint at {path}: starting from scratch")
        return 0, []
    ckpt = torch.load(path, map_location=device, weights_only=True)
    net.load_state_dict(ckpt["model"])  # every rank reads the same file: still equal
    opt.load_state_dict(ckpt["optimizer"])  # momentum too, or the next steps differ
    say(f"resumed from {path} at epoch {ckpt['epoch'] + 2}, after step {ckpt['step']}")
    return ckpt["epoch"] + 1, list(ckpt["losses"])


def plant_crash(opt: torch.optim.Optimizer, done: int, at: int) -> None:
    """Make this rank raise once `opt` has taken step `at` (`done` steps so far)."""
    steps = [done]

    def crash(optimizer, args, kwargs) -> None:  # runs after every opt.step()
        steps[0] += 1
        if steps[0] == at:
            raise RuntimeError(f"simulated crash on rank {dist.get_rank()} at step "
                               f"{at}")

    opt.register_step_post_hook(crash)


@record  # a crashing rank's traceback reaches torchrun's summary
def main(argv: list[str] | None = None) -> None:
    p = make_parser()
    p.add_argument("--fail-rank", type=int, default=-1, help="the rank that crashes")
    p.add_argument("--fail-epoch", type=int, default=1, help="when: epoch 1, 2, ...")
    p.add_argument("--fail-once", action="store_true", help="in attempt 1 only")
    args = p.parse_args(argv)
    device, loader, model, opt = build(args)
    start, losses = resume(Path(args.checkpoint), model.module, opt, device)
    steps = math.ceil(len(loader) / args.accum)  # optimizer steps per epoch
    if dist.get_rank() == args.fail_rank and not (args.fail_once and attempt()):
        plant_crash(opt, done=start * steps, at=(args.fail_epoch - 1) * steps + 2)
    losses, step_ms = fit(args, model, opt, loader, device, start, losses)
    report(model, losses, step_ms, args.dump, restarts=attempt(), start_epoch=start,
           start_step=start * steps)
    leave()


if __name__ == "__main__":
    main()
