"""Resume gpt_mesh.py's checkpoint (2 x 2 mesh, step k) on another layout: FSDP2 alone.

DCP saved every rank's shards of the model and of Adam's state by name, with the
global shapes and placements; `get_state_dict` on the new model asks for the shards
that *this* layout needs, `dcp.load` reads just those, and `set_state_dict` puts them
in place. Three resumes train the same steps after k, from the same state: through
DCP, from the same state handed over as full tensors (no DCP), and through DCP with
the model only (a fresh Adam), which is not the same run. Called by gpt_mesh.py.
"""

from __future__ import annotations

from pathlib import Path

import gpt
import torch
import torch.distributed.checkpoint as dcp
from gpt_fsdp import adam, build, train
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions,
    get_model_state_dict,
    get_state_dict,
    set_model_state_dict,
    set_state_dict,
)


def resume(cfg, data, device, mesh, dp, ckpt: str, k: int, m: int) -> dict:
    """Resume at step k three ways, train m steps each; return their full weights."""
    ckpt, res, group = Path(ckpt), {}, mesh.get_group()
    for how in ("dcp", "handover", "model_only"):
        model = build(cfg, torch.float64, device, mesh, seed=1)  # other weights:
        opt = adam(model)  # whatever is not loaded shows
        if how == "dcp":
            msd, osd = get_state_dict(model, opt)  # NEW: the shards this layout needs
            state = {"model": msd, "optim": osd}
            dcp.load(state, checkpoint_id=ckpt, process_group=group)  # NEW: resharded
            set_state_dict(model, opt, model_state_dict=state["model"],
                           optim_state_dict=state["optim"])  # NEW
        elif how == "handover":  # the same state, as full tensors: no DCP
            full_model, full_optim = torch.load(ckpt.parent / "handover.pt")
            set_state_dict(model, opt, model_state_dict=full_model,
                           optim_state_dict=full_optim,
                           options=StateDictOptions(full_state_dict=True))
        else:  # the weights alone: Adam starts again from zero moments, step 0
            msd = get_model_state_dict(model)
            dcp.load({"model": msd}, checkpoint_id=ckpt, process_group=group)
            set_model_state_dict(model, msd)
        res[f"{how}_k"] = gpt.full_params(model)
        train(model, opt, data, m, first=k, dp=dp)
        res[how] = gpt.full_params(model)
    return res
