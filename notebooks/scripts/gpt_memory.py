"""What a rank holds, measured: FSDP2's resharding and DDP, after each moment.

§4 and §7 of notebook 16: `Memory` (the bytes of every tensor made inside it that is
still alive, whoever holds it) reads a rank's bytes at rest and after forward,
backward and `opt.step()` under DDP, FSDP2 with `reshard_after_forward` True and
False, and FSDP2 after a first micro-batch with gradient sync off; the all-gathers
in backward are counted by common.Traffic. Run by gpt_lessons.py; copy the folder,
not this file.
"""

from __future__ import annotations

import gpt
import torch
from common import Traffic, nbytes
from gpt_fsdp import BATCH, adam, build, ddp, replica, state_bytes, train
from torch.distributed.tensor import DTensor
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves


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


def memory(cfg, data, device, mesh, rank, world) -> dict:
    """§4, §7: each way's bytes after each moment of a step, and its collectives."""
    f32 = torch.float32  # §4, §7: DDP; ZeRO-3; full weights kept; sync off, 2 micro
    make = {"ddp": lambda: ddp(replica(cfg, f32, device), mesh.get_group()),
            "zero3": lambda: build(cfg, f32, device, mesh, reshard_after_forward=True),
            "kept": lambda: build(cfg, f32, device, mesh, reshard_after_forward=False),
            "no_sync": lambda: build(cfg, f32, device, mesh,
                                        reshard_after_forward=True)}
    return {name: moments(fn, data, device, rank, world,
                          micro=2 if name == "no_sync" else 1)
            for name, fn in make.items()}


