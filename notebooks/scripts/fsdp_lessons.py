"""Run notebook 14's four lessons in one launch, over one or more world sizes.

    torchrun --standalone --nproc-per-node=4 fsdp_lessons.py --out OUT --worlds 2,4

Each start of torch costs seconds, so the notebook starts it once: the first world
(its first ranks, while the others wait) runs fsdp_train.py, fsdp_variants.py,
fsdp_tp_mlp.py and saves fsdp_checkpoint.py's checkpoint; each later world measures
one fsdp_train.py step and reloads that checkpoint. `--reload`: every world does only
that (a second launch, when the first ran on GPUs that the later world lacks).
Options other than these two go to every lesson. Copy the folder, not this file.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import fsdp_checkpoint
import fsdp_tp_mlp
import fsdp_train
import fsdp_variants
import torch.distributed as dist
from common import leave
from fsdp_model import join
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.elastic.multiprocessing.errors import record


@record  # a crashing rank's error reaches torchrun, and the launcher's message
def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worlds", default=None,
                   help="world sizes to run in turn on the first ranks, e.g. 2,4; "
                        "default: all ranks once")
    p.add_argument("--reload", action="store_true",
                   help="every world measures one step and reloads OUT/ckpt")
    mine, rest = p.parse_known_args(argv)
    args = fsdp_train.parse_args(rest)  # the family's options, shared by the lessons
    device, mesh = join(args)
    rank, world = dist.get_rank(), dist.get_world_size()
    worlds = [int(w) for w in mine.worlds.split(",")] if mine.worlds else [world]
    for size in worlds:
        if not 1 <= size <= world or args.batch_size % size:
            raise SystemExit(f"world {size}: needs 1..{world} ranks and a "
                             f"--batch-size ({args.batch_size}) that divides by it")
    ckpt = Path(args.out) / "ckpt"
    for i, size in enumerate(worlds):
        first = i == 0 and not mine.reload
        if size != world:  # the first `size` ranks; every rank must join new_group
            group = dist.new_group(list(range(size)))
            here = DeviceMesh.from_group(group, device.type) if rank < size else None
        else:
            here = mesh
        if rank < size:
            args.one_step = not first
            fsdp_train.run(args, device, here)
            if first:
                fsdp_variants.run(args, device, here)
                fsdp_tp_mlp.run(args, device, here)
            fsdp_checkpoint.checkpoint(ckpt, first, args, device, here)
        dist.barrier()  # the other ranks wait here, idle
    leave()


if __name__ == "__main__":
    main()
