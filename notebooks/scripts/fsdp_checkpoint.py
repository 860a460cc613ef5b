"""Save a sharded FSDP2 checkpoint, and load it under another world size (notebook
14, §4), with torch.distributed.checkpoint (DCP).

    torchrun --standalone --nproc-per-node=2 fsdp_checkpoint.py --out D --save
    torchrun --standalone --nproc-per-node=4 fsdp_checkpoint.py --out D

Each rank writes its own shards plus metadata, and reads back the pieces its own
DTensors need. `--save` trains FSDP2 `--steps` steps and saves to OUT/ckpt; without
it a fresh model with other weights loads OUT/ckpt. Either way rank 0 writes the full
weights the model then holds to OUT/saved_w{world}.pt or OUT/loaded_w{world}.pt.

Notebook 14 runs it through fsdp_lessons.py. It imports fsdp_model.py and common.py:
copy the folder, not this file.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from common import full_state, leave, log
from fsdp_model import Trainer, add_model_args, build, join, shard
from torch.distributed.elastic.multiprocessing.errors import record


def checkpoint(path: Path, save: bool, args, device: torch.device, mesh) -> Path:
    """Save a trained model's shards, or load them; write the full weights held."""
    group, f32 = mesh.get_group(), torch.float32  # the ranks of this world
    if save:  # NEW: each rank writes its own shards, in parallel
        trainer = Trainer(shard(build(args, f32, device), mesh), args, f32, device,
                          dist.get_rank(group), mesh.size())
        for _ in range(args.steps):
            trainer.step()
        model = trainer.model
        dcp.save({"model": model.state_dict()}, checkpoint_id=path, process_group=group)
    else:  # NEW: a fresh model, other weights, sharded for *this* world size
        model = shard(build(args, f32, device, seed=1), mesh)
        state = {"model": model.state_dict()}  # DTensors: they say what to read
        dcp.load(state, checkpoint_id=path, process_group=group)  # NEW: in place
        model.load_state_dict(state["model"])
    weights = full_state(model)  # every rank gathers; rank 0 writes
    tag = "saved" if save else "loaded"
    target = Path(args.out) / f"{tag}_w{mesh.size()}.pt"
    if dist.get_rank() == 0:
        torch.save(weights, target)
    log(f"{tag} a sharded checkpoint: {len(weights)} tensors")
    return target


@record  # a crashing rank's error reaches torchrun, and the launcher's message
def main(argv: list[str] | None = None) -> None:
    p = add_model_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    p.add_argument("--save", action="store_true", help="train and save, else load")
    args = p.parse_args(argv)
    device, mesh = join(args)
    checkpoint(Path(args.out) / "ckpt", args.save, args, device, mesh)
    leave()


if __name__ == "__main__":
    main()
