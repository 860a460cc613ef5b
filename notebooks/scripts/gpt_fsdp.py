"""FSDP2 on gpt.py's transformer as large runs do it; gpt_mesh.py runs it on 2 ranks.

Build on the `meta` device (no memory), `fully_shard` each block then the root,
`to_empty` on the real device, then `gpt.init_weights`: no rank ever holds the whole
model. This file holds that recipe (`build`), a counter of collectives (`Traffic`), a
training loop, and two lessons: `lessons` (a bf16 `MixedPrecisionPolicy`, gradient
accumulation with `set_requires_gradient_sync`, `reshard_after_forward` True vs False,
the bytes per rank they and DDP leave) and `strategies` (DDP, FSDP2 and one process
in float64: the weights, step times, collectives and bytes).
"""

from __future__ import annotations

import statistics
import time
from contextlib import nullcontext

import gpt
import torch
import torch.distributed as dist
from fsdp_model import nbytes  # notebook 14's: the bytes this rank stores
from torch import nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils._python_dispatch import TorchDispatchMode

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


class Traffic(TorchDispatchMode):
    """Count the collectives run inside it, and their payload bytes."""

    def __init__(self):
        super().__init__()
        self.calls, self.bytes = {}, {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if any(issubclass(t, DTensor) for t in types):  # modes run before subclasses:
            return NotImplemented  # let DTensor run the collectives its ops need
        out = func(*args, **(kwargs or {}))
        name = func.__name__.split(".")[0].strip("_")  # e.g. allgather_base
        if func.namespace in ("c10d", "_c10d_functional") and "wait" not in name:
            sizes = [t.numel() * t.element_size() for t in torch.utils._pytree
                     .tree_leaves((args, out)) if isinstance(t, torch.Tensor)]
            if not any(w in name for w in ("all", "reduce", "scatter", "broadcast")):
                return out  # not a collective: a DTensor's own bookkeeping
            self.calls[name] = self.calls.get(name, 0) + 1  # the gathered or summed
            self.bytes[name] = self.bytes.get(name, 0) + max(sizes, default=0)  # size
        return out


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
        sync(device)
        t0 = time.perf_counter()
        for i, (xm, ym) in enumerate(zip(x.chunk(micro), y.chunk(micro), strict=True)):
            if hasattr(model, "set_requires_gradient_sync"):  # NEW: FSDP2's no_sync
                model.set_requires_gradient_sync(i == micro - 1)  # reduce on the last
            with loss_context():
                (gpt.loss_fn(model(xm), ym) / micro).backward()
        opt.step()
        if times is not None:
            sync(device)  # a GPU runs the step after Python queued it: wait for it
            times.append(time.perf_counter() - t0)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def gpu_peak(device: torch.device, reset: bool = False) -> int | None:
    """Return this GPU's most bytes allocated since the last reset (None on a CPU)."""
    if device.type != "cuda":
        return None
    peak = torch.cuda.max_memory_allocated(device)
    if reset:
        torch.cuda.reset_peak_memory_stats(device)
    return peak


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


def lessons(cfg, data, device, mesh, rank, world, steps) -> dict:
    """§2-§4 and §7 of notebook 16: mixed precision, accumulation, resharding, bytes."""
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
    res["accumulate"] = {"params": gpt.full_params(model), "calls": traffic.calls}
    for keep in (True, False):  # §4: ZeRO-3, or the full weights kept for backward
        model = build(cfg, torch.float32, device, mesh, reshard_after_forward=keep)
        opt = adam(model)
        x, y = (t.chunk(world)[rank].to(device)
                for t in gpt.batch(data, 0, BATCH, cfg.block))
        logits = model(x)
        held = nbytes(model.parameters())  # registered between forward, backward
        with Traffic() as backward:
            gpt.loss_fn(logits, y).backward()
        opt.step()  # §7: the bytes a step leaves on this rank
        res[f"reshard{keep}"] = {"held": held, "backward": backward.calls,
                                 **state_bytes(model, opt)}
    model = ddp(replica(cfg, torch.float32, device), mesh.get_group())  # §7: DDP
    opt = adam(model)
    train(model, opt, data, 1, dp=(rank, world))
    res["ddp"] = state_bytes(model, opt)
    return res


def strategies(cfg, data, device, mesh, rank, world, steps) -> dict:
    """§8: DDP, FSDP2, then one process on rank 0 alone, in float64: each one's
    weights, step times, collectives and bytes (and its peak, on a GPU)."""
    res, group, f64 = {}, mesh.get_group(), torch.float64
    make = {"ddp": lambda: ddp(replica(cfg, f64, device), group),
            "fsdp": lambda: build(cfg, f64, device, mesh),
            "single": lambda: replica(cfg, f64, device)}
    for name, fn in make.items():
        dist.barrier(group)  # each strategy starts on a quiet machine
        if name == "single" and rank != 0:
            continue  # rank 1 waits at the last barrier: rank 0 trains alone
        dp = (0, 1) if name == "single" else (rank, world)
        gpu_peak(device, reset=True)
        model, times = fn(), []
        opt = adam(model)
        with Traffic() as traffic:  # the first step: counted, and a warm-up
            train(model, opt, data, 1, dp=dp)
        train(model, opt, data, steps - 1, first=1, dp=dp, times=times)
        res[name] = {"params": gpt.full_params(getattr(model, "module", model)),
                     "step_s": statistics.median(times), "samples": times,
                     "traffic": traffic.bytes, "calls": traffic.calls,
                     "bytes": state_bytes(model, opt), "peak": gpu_peak(device)}
    dist.barrier(group)
    return res
