"""Resume gpt_mesh.py's checkpoint (2 x 2 mesh, step k) on another layout: FSDP2 alone.

DCP saved every rank's shards of the model and of Adam's state by name, with the
global shapes and placements; `get_state_dict` on the new model asks for the shards
that *this* layout needs, `dcp.load` reads just those, and `set_state_dict` puts them
in place. The resumed weights and Adam state, gathered from the tensors themselves
(`full_state`, no state_dict API), are returned to be compared with the mesh's own at
step k; then it trains `m` more steps. A second resume loads the model only (a fresh
Adam), which is not the same run. Called by gpt_mesh.py.
"""

from __future__ import annotations

from pathlib import Path

import gpt
import torch
import torch.distributed.checkpoint as dcp
from gpt_fsdp import adam, build, full_state, train
from torch.distributed.checkpoint.state_dict import (
    get_model_state_dict,
    get_state_dict,
    set_model_state_dict,
    set_state_dict,
)


def resume(cfg, data, device, mesh, dp, ckpt: str, k: int, m: int) -> dict:
    """Resume at step k two ways; return the state at k, and the weights m steps on."""
    ckpt, res, group = Path(ckpt), {}, mesh.get_group()
    for how in ("dcp", "model_only"):
        model = build(cfg, torch.float64, device, mesh, seed=1)  # other weights:
        opt = adam(model)  # whatever is not loaded shows
        if how == "dcp":
            msd, osd = get_state_dict(model, opt)  # NEW: the shards this layout needs
            state = {"model": msd, "optim": osd}
            dcp.load(state, checkpoint_id=ckpt, process_group=group)  # NEW: resharded
            set_state_dict(model, opt, model_state_dict=state["model"],
                           optim_state_dict=state["optim"])  # NEW
        else:  # the weights alone: Adam starts again from zero moments, step 0
            msd = get_model_state_dict(model)
            dcp.load({"model": msd}, checkpoint_id=ckpt, process_group=group)
            set_model_state_dict(model, msd)
        res[f"{how}_k"] = full_state(model, opt)  # to compare with the mesh's own
        train(model, opt, data, m, first=k, dp=dp)
        res[how] = gpt.full_params(model)
    return res
