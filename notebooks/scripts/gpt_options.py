"""FSDP2's step options on the transformer: mixed precision, and accumulation.

§2 of notebook 16: a bf16 `MixedPrecisionPolicy` (float16 on a GPU without bf16)
computes in half precision and all-gathers 2 bytes per parameter, while the stored
shards and Adam's state stay float32. §3: the global batch in 4 micro-batches, each
reduce-scatter deferred with `set_requires_gradient_sync` but the last; its weights
are compared with gpt_strategies.py's one batch. Collectives are counted by
common.Traffic. Run by gpt_lessons.py; copy the folder, not this file.
"""

from __future__ import annotations

import torch
from common import Traffic, full_state
from gpt_fsdp import adam, build, train
from torch.distributed.fsdp import MixedPrecisionPolicy


def options(cfg, data, device, mesh, rank, world, steps) -> dict:
    """§2-§3 of notebook 16: mixed precision, then accumulation; their results."""
    res, f64 = {}, torch.float64
    half = torch.bfloat16  # a GPU without bf16 units (a T4) computes in float16
    if device.type == "cuda" and not torch.cuda.is_bf16_supported(False):
        half = torch.float16
    policy = MixedPrecisionPolicy(param_dtype=half, reduce_dtype=torch.float32)  # NEW
    model = build(cfg, torch.float32, device, mesh, mp_policy=policy)  # NEW
    seen = []
    model.blocks[0].mlp.fc.register_forward_pre_hook(
        lambda m, a: seen.append((str(m.weight.dtype), str(a[0].dtype))))
    opt = adam(model)
    with Traffic() as mixed:
        train(model, opt, data, 1, dp=(rank, world))
    res["mixed"] = {"forward": seen[0], "traffic": mixed.bytes,
                    "param": str(next(model.parameters()).dtype),
                    "adam": sorted({str(v.dtype) for s in opt.state.values()
                                    for k, v in s.items() if k != "step"})}
    model = build(cfg, f64, device, mesh)  # §3: the global batch in 4 micro-batches
    opt = adam(model)  # (strategies() trains the same steps in one)
    with Traffic() as traffic:
        train(model, opt, data, steps, dp=(rank, world), micro=4)
    res["accumulate"] = {"params": full_state(model), "calls": traffic.calls}
    return res
