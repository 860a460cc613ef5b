"""FSDP2 on gpt.py's transformer as large runs do it (notebook 16, via gpt_lessons.py).

Build on the `meta` device (no memory), `fully_shard` each block then the root,
`to_empty` on the real device, then `gpt.init_weights`: no rank ever holds the whole
model. This file holds that recipe (`build`), a memory probe (`Memory`: the bytes of
every tensor made inside it that is still alive), a training loop, and two lessons:
`lessons` (a bf16 `MixedPrecisionPolicy`, gradient accumulation with
`set_requires_gradient_sync`, `reshard_after_forward` True vs False, the bytes a rank
holds after forward, backward and step under each and under DDP) and
`strategies` (DDP, FSDP2 and one process in float64: the weights, step times,
collectives and bytes). Collectives are counted by common.Traffic (PyTorch's
CommDebugMode, plus bytes). It imports gpt.py and common.py: copy the folder.
"""

from __future__ import annotations

import gc
import statistics
from contextlib import nullcontext

import gpt
import torch
import torch.distributed as dist
from common import Traffic, clock, full_state, nbytes
from torch import nn
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor
from torch.multiprocessing.reductions import StorageWeakRef
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

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


class Memory(TorchDispatchMode):
    """Hold a weak reference to every storage an operator makes inside it; `held()`
    sums the bytes of those still alive: one probe on any device, whoever holds them
    (the model, FSDP2's buffers, DDP's buckets, autograd's saved activations)."""

    def __init__(self):
        super().__init__()
        self.refs = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if any(issubclass(t, DTensor) for t in types):  # modes run before subclasses:
            return NotImplemented  # see the plain tensors DTensor's operators make
        out = func(*args, **(kwargs or {}))
        if not any(r.alias_info for r in func._schema.returns):  # a new tensor, not
            for t in tree_leaves(out):  # a view or an in-place result of another
                if isinstance(t, torch.Tensor):
                    ref = StorageWeakRef(t.untyped_storage())  # does not keep it alive
                    self.refs.setdefault(ref.cdata, ref)
        return out

    def held(self) -> int:
        """Return the bytes of the storages made inside this probe and still alive."""
        for key in [k for k, ref in self.refs.items() if ref.expired()]:
            del self.refs[key]
        return sum(torch.UntypedStorage._new_with_weak_ptr(key).nbytes()  # now:
                   for key in self.refs)  # FSDP2 resizes its all-gather buffers to 0


def moments(make, data, device, rank, world, micro: int = 1) -> dict:
    """§4, §7: build with `make`, train a step (Adam's state now exists), then read
    this rank's bytes after the next step's forward, backward and `opt.step()`; with
    `micro=2`, also after a first micro-batch whose gradient sync is off."""
    x, y = (t.chunk(world)[rank].to(device)  # made outside the probe: not counted
            for t in gpt.batch(data, 1, BATCH, gpt.Config().block))
    at = {}
    with Memory() as mem:
        model = make()
        opt = adam(model)
        train(model, opt, data, 1, dp=(rank, world))
        opt.zero_grad(set_to_none=True)  # as train() does at the start of a step
        at["at rest"] = mem.held()
        if micro == 2:  # NEW: the first half of the rows, its reduce-scatter deferred
            model.set_requires_gradient_sync(False)
            gpt.loss_fn(model(x[:2]), y[:2]).backward()
            at["after micro-batch 1"] = mem.held()
            model.set_requires_gradient_sync(True)
            x, y = x[2:], y[2:]
        loss = gpt.loss_fn(model(x), y)
        at["after forward"] = mem.held()  # activations included
        held = nbytes(model.parameters())  # what the model's parameters are now
        with Traffic() as backward:
            loss.backward()
        del loss  # its 4 bytes
        at["after backward"] = mem.held()
        opt.step()
        at["after step"] = mem.held()
    return {"at": at, "held": held, "backward": backward.calls,
            **state_bytes(model, opt)}


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
    res["accumulate"] = {"params": full_state(model), "calls": traffic.calls}
    f32 = torch.float32  # §4, §7: DDP; ZeRO-3; full weights kept; sync off, 2 micro
    make = {"ddp": lambda: ddp(replica(cfg, f32, device), mesh.get_group()),
            "zero3": lambda: build(cfg, f32, device, mesh, reshard_after_forward=True),
            "kept": lambda: build(cfg, f32, device, mesh, reshard_after_forward=False),
            "no_sync": lambda: build(cfg, f32, device, mesh,
                                        reshard_after_forward=True)}
    res["memory"] = {name: moments(fn, data, device, rank, world,
                                   micro=2 if name == "no_sync" else 1)
                     for name, fn in make.items()}
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
        model = opt = None  # the last strategy's model, gradients and Adam state go
        held = gpu_reset(device)  # from here: this strategy's peak, above what is left
        model, times = fn(), []
        opt = adam(model)
        with Traffic() as traffic:  # the first step: counted, and a warm-up
            train(model, opt, data, 1, dp=dp)
        train(model, opt, data, steps - 1, first=1, dp=dp, times=times)
        res[name] = {"params": full_state(model),  # DDP's, FSDP2's: every rank
                     "step_s": statistics.median(times), "samples": times,
                     "traffic": traffic.bytes, "calls": traffic.calls,
                     "bytes": state_bytes(model, opt), "peak": gpu_peak(device, held)}
    dist.barrier(group)
    return res
