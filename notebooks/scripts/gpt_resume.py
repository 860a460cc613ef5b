"""Resume gpt_mesh.py's checkpoint (2 x 2 mesh, step k) on another layout: FSDP2 alone.

    torchrun --standalone --nproc-per-node=2 gpt_resume.py --out build/gpt

DCP saved every rank's shards of the model and of Adam's state by name, with the
global shapes and placements; `get_state_dict` on the new model asks for the shards
that *this* layout needs, `dcp.load` reads just those, and `set_state_dict` puts them
in place. The resumed weights and Adam state, gathered from the tensors themselves
(`gpt_fsdp.gathered_state`, no state_dict API), are returned to be compared with the
mesh's own at step k; then it trains `m` more steps. A second resume loads the model
only (a fresh Adam), which is not the same run. Called by gpt_lessons.py (notebook 16);
it imports gpt.py, gpt_fsdp.py and common.py: copy the folder, not this file.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

import gpt
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from common import full_state, leave, save_record, setup
from gpt_fsdp import adam, build, gathered_state, train
from torch.distributed.checkpoint.state_dict import (
    get_model_state_dict,
    get_state_dict,
    set_model_state_dict,
    set_state_dict,
)
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.elastic.multiprocessing.errors import record


@dataclass
class Resumed:
    """Both resumes on this rank (OUT/resume_r{rank}.pt; gpt_lessons.py keeps it)."""

    dcp_k: dict[str, torch.Tensor]  # weights and Adam state at step k, loaded by DCP
    dcp: dict[str, torch.Tensor]  # its weights m steps on
    model_only_k: dict[str, torch.Tensor]  # the weights alone loaded, a fresh Adam
    model_only: dict[str, torch.Tensor]  # its weights m steps on


def resume(cfg, data, device, mesh, dp, ckpt: str, k: int, m: int) -> Resumed:
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
        res[f"{how}_k"] = gathered_state(model, opt)  # to compare with the mesh's
        train(model, opt, data, m, first=k, dp=dp)
        res[how] = full_state(model)
    return Resumed(**res)


@record  # a crashing rank's error reaches torchrun, and the launcher's message
def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="the folder of gpt_mesh.py's ckpt")
    p.add_argument("--steps", type=int, default=3, help="the step it was saved at")
    p.add_argument("--more", type=int, default=2, help="steps to train on")
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    args = p.parse_args(argv)
    device = setup(args.device)
    rank, world, out = dist.get_rank(), dist.get_world_size(), Path(args.out)
    mesh = init_device_mesh(device.type, (world,))  # FSDP2 alone, on every rank
    res = resume(gpt.Config(), gpt.corpus(), device, mesh, (rank, world),
                 out / "ckpt", args.steps, args.more)
    save_record(out / f"resume_r{rank}.pt", res)
    leave()


if __name__ == "__main__":
    main()
