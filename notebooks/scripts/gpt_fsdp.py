"""FSDP2 on gpt.py's transformer as large runs do it (notebook 16, via gpt_lessons.py).

Build on the `meta` device (no memory), `fully_shard` each block then the root,
`to_empty` on the real device, then `gpt.init_weights`: no rank ever holds the whole
model. This file holds that recipe (`build`), the training loop, and what the
sharded lessons share: the whole model for DDP and one process, this rank's bytes,
its GPU peak, and the state gathered by hand. The lessons that use it:
gpt_options.py, gpt_memory.py, gpt_strategies.py, gpt_mesh.py, gpt_resume.py. It
imports gpt.py and common.py: copy the folder.
"""

from __future__ import annotations

import gc
from contextlib import nullcontext

import gpt
import torch
from common import clock, nbytes
from torch import nn
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel as DDP

BATCH, BLOCK, LR = 8, gpt.Config().block, 1e-3  # the global batch: 8 rows of 64 tokens


def build(cfg, dtype, device, mesh, parallelize=None, seed=0, **options) -> nn.Module:
    """Build the model on `meta`, shard it (FSDP2, after `parallelize`), then init."""
    with torch.device("meta"):  # NEW: shapes only, no memory
        model = gpt.GPT(cfg).to(dtype)
    if parallelize is not None:  # tensor parallelism first (gpt_mesh.py)
        parallelize(model)
    for block in model.blocks:  # NEW: one all-gather per block, just in time
        fully_shard(block, mesh=mesh, **options)
    fully_shard(model, mesh=mesh, **options)  # NEW: the embedding, head and norm
    model.to_empty(device=device)  # NEW: real memory for this rank's shards only
    gpt.init_weights(model, seed)  # NEW: one full parameter at a time, then sliced
    return model


def state_bytes(model: nn.Module, opt) -> dict[str, int]:
    """Return this rank's bytes of parameters, gradients and Adam state."""
    params = list(model.parameters())
    state = [v for s in opt.state.values() for k, v in s.items() if k != "step"]
    return {"params": nbytes(params),
            "grads": nbytes(p.grad for p in params if p.grad is not None),
            "optimizer": nbytes(state)}


def train(model, opt, data, steps: int, first: int = 0, dp=(0, 1), micro: int = 1,
          loss_context=nullcontext, times: list | None = None) -> None:
    """Train `steps` steps from step `first`; this data-parallel rank takes its rows."""
    device = next(model.parameters()).device  # the rows go where the weights are
    for step in range(first, first + steps):
        x, y = (t.chunk(dp[1])[dp[0]].to(device)
                for t in gpt.batch(data, step, BATCH, BLOCK))
        opt.zero_grad(set_to_none=True)  # at the start: a step leaves its gradients
        t0 = clock(device)
        for i, (xm, ym) in enumerate(zip(x.chunk(micro), y.chunk(micro), strict=True)):
            if hasattr(model, "set_requires_gradient_sync"):  # NEW: FSDP2's no_sync
                model.set_requires_gradient_sync(i == micro - 1)  # reduce on the last
            with loss_context():
                (gpt.loss_fn(model(xm), ym) / micro).backward()
        opt.step()
        if times is not None:  # a GPU runs the step after Python queued it: wait
            times.append(clock(device) - t0)


def gathered_state(model: nn.Module, opt) -> dict[str, torch.Tensor]:
    """Return every parameter and its Adam state (`name`, `name:exp_avg`, ...) as full
    CPU tensors, gathered from the tensors themselves.

    Hand-written on purpose, not `get_state_dict`: notebook 16 proves that DCP, which
    saves and loads through that API, gives every tensor back, so the proof reads the
    tensors another way. Plain weights to compare: common.full_state.
    """
    def whole(t):
        return (t.full_tensor() if isinstance(t, DTensor) else t).detach().cpu().clone()

    out = {}
    for name, p in getattr(model, "module", model).named_parameters():
        out[name] = whole(p)
        out.update({f"{name}:{key}": whole(torch.as_tensor(v))
                    for key, v in opt.state.get(p, {}).items()})
    return out


def gpu_reset(device: torch.device) -> int:
    """Reset this GPU's peak; return the bytes allocated now (0 on a CPU)."""
    if device.type != "cuda":
        return 0
    gc.collect()  # what nothing refers to any more is freed before the count
    torch.cuda.reset_peak_memory_stats(device)
    return torch.cuda.memory_allocated(device)


def gpu_peak(device: torch.device, held: int = 0) -> int | None:
    """Return this GPU's most bytes at once since the reset, less `held` (CPU: None)."""
    if device.type != "cuda":
        return None
    return torch.cuda.max_memory_allocated(device) - held


def adam(model: nn.Module) -> torch.optim.Optimizer:
    return torch.optim.Adam(model.parameters(), lr=LR)


def replica(cfg, dtype, device) -> gpt.GPT:
    """Return the whole model, initialised: one process's, or a DDP replica."""
    model = gpt.GPT(cfg).to(device=device, dtype=dtype)
    gpt.init_weights(model)
    return model


def ddp(model: nn.Module, group) -> DDP:
    """Wrap `model` in DDP; its gradients are its buckets, so bytes count it all."""
    ids = [model.tok.weight.device.index] if model.tok.weight.is_cuda else None
    return DDP(model, process_group=group, device_ids=ids,
               gradient_as_bucket_view=True)


