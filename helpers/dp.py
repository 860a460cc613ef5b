"""Rebuild `nn.DataParallel` by hand: replicate, scatter, parallel apply, gather.

Works on a list of devices or on a count of copies of one device (several "devices"
that are all the CPU), so the mechanics run and are checked on a laptop. Nothing runs
at import time. Used by notebook 08: each docstring ends with it (08).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Sequence

import torch
from torch import nn

__all__ = ["GPU_TOLERANCE", "TOLERANCE", "data_parallel_step", "gather",
           "parallel_apply", "reduce_grads", "replicate", "scatter", "split_sizes"]

Devices = int | Sequence[torch.device | str]
# how far the hand-built step may be from one full-batch step: float32 sums in another
# order, nothing more; and from nn.DataParallel on GPUs, whose kernels differ (08)
TOLERANCE = {"rtol": 1e-5, "atol": 1e-6}
GPU_TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}


def _device_list(devices: Devices, default: torch.device | str) -> list[torch.device]:
    """Turn a count into that many copies of `default`, or normalise a device list."""
    listed = [default] * devices if isinstance(devices, int) else devices
    return [torch.device(d) for d in listed]


def split_sizes(batch: int, n: int) -> list[int]:
    """Return the chunk sizes DataParallel splits `batch` rows in for `n` GPUs (08)."""
    if batch < 0 or n < 1:
        raise ValueError(f"need batch >= 0 and n >= 1, got batch={batch}, n={n}")
    if batch == 0:
        return [0] * n
    size = -(-batch // n)  # ceil(batch / n), as torch.chunk does; may use < n chunks
    return [min(size, batch - start) for start in range(0, batch, size)]


def replicate(module: nn.Module, devices: Devices) -> list[nn.Module]:
    """Return one copy of `module` per device (an int: that many on its device) (08)."""
    source = next(module.parameters()).device
    replicas = [copy.deepcopy(module).to(d) for d in _device_list(devices, source)]
    for r in replicas:
        r.zero_grad(set_to_none=True)  # start empty: reduce_grads adds only new grads
    return replicas


def scatter(batch: torch.Tensor, devices: Devices) -> list[torch.Tensor]:
    """Split `batch` along dim 0 as DataParallel does, one chunk per device (08)."""
    targets = _device_list(devices, batch.device)
    sizes = split_sizes(batch.shape[0], len(targets))
    used = targets[:len(sizes)]  # a small batch may fill fewer devices than given
    return [c.to(d) for c, d in zip(torch.split(batch, sizes), used, strict=True)]


def parallel_apply(replicas: Sequence[nn.Module],
                   chunks: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Run replica i on chunk i, each in its own thread; return the outputs (08)."""
    if len(replicas) != len(chunks):
        raise ValueError(f"{len(replicas)} replicas but {len(chunks)} chunks")
    results: list[torch.Tensor | BaseException | None] = [None] * len(chunks)
    grad_enabled = torch.is_grad_enabled()  # grad mode is per thread: pass it on

    def work(i: int) -> None:
        try:
            with torch.set_grad_enabled(grad_enabled):
                results[i] = replicas[i](chunks[i])
        except BaseException as err:  # re-raised in the caller's thread below
            results[i] = err

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(chunks))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results  # type: ignore[return-value]


def gather(outputs: Sequence[torch.Tensor]) -> torch.Tensor:
    """Concatenate the outputs on the first output's device, as on GPU 0 (08)."""
    return torch.cat([o.to(outputs[0].device) for o in outputs])


def reduce_grads(module: nn.Module, replicas: Sequence[nn.Module]) -> None:
    """Add the SUM of the replicas' gradients to `module`'s, as Broadcast does (08)."""
    params = [module.parameters(), *(r.parameters() for r in replicas)]
    for p, *copies in zip(*params, strict=True):
        grads = [c.grad.to(p.device) for c in copies if c.grad is not None]
        if not grads:
            continue
        total = torch.stack(grads).sum(0)
        p.grad = total if p.grad is None else p.grad + total


def data_parallel_step(module: nn.Module, inputs: torch.Tensor, target: torch.Tensor,
                       loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
                       devices: Devices) -> tuple[torch.Tensor, torch.Tensor]:
    """Run a DataParallel forward and backward; leave summed grads in `module` (08)."""
    chunks = scatter(inputs, devices)
    replicas = replicate(module, [c.device for c in chunks])
    output = gather(parallel_apply(replicas, chunks))  # all outputs on device 0
    loss = loss_fn(output, target.to(output.device))  # one loss over the whole batch
    loss.backward()  # each replica's parameters receive their part of the gradient
    reduce_grads(module, replicas)
    return output.detach(), loss.detach()
