"""Save a sharded FSDP2 checkpoint with torch.distributed.checkpoint (DCP), and load
it under another world size: each rank writes its own shards plus metadata, and
reads back the pieces its own DTensors need. Called by fsdp_train.py.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.distributed.checkpoint as dcp
from fsdp_model import Net, build, full_params, shard


def checkpoint(path: str, save: bool, model: Net, args, device: torch.device,
               rank: int, mesh, out: Path) -> None:
    """Save or load a sharded checkpoint; write the full weights it holds."""
    group = mesh.get_group()  # the ranks of this world
    if save:  # NEW: each rank writes its own shards, in parallel
        dcp.save({"model": model.state_dict()}, checkpoint_id=path, process_group=group)
        tag = "saved"
    else:  # NEW: a fresh model, other weights, sharded for *this* world size
        model = shard(build(args, torch.float32, device, seed=1), mesh)
        state = {"model": model.state_dict()}  # DTensors: they say what to read
        dcp.load(state, checkpoint_id=path, process_group=group)  # NEW: in place
        model.load_state_dict(state["model"])
        tag = "loaded"
    weights = full_params(model)
    if rank == 0:
        torch.save(weights, out / f"{tag}_w{mesh.size()}.pt")
        print(f"{tag} a sharded checkpoint: {len(weights)} tensors")
