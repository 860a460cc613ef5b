"""Gradient compression: bf16_compress_hook halves the bytes DDP all-reduces.

    torchrun --standalone --nproc-per-node=2 comm_compress.py --out build/comm

Two copies of one model train 10 steps, with DDP's default all-reduce hook and with
bf16_compress_hook; a stand-in for dist.all_reduce adds up the bytes each hook hands
it (gloo and nccl reduce bfloat16 on every device; torch.cuda.is_bf16_supported is
about computing in it). Rank 0 writes how far the weights moved apart, and whether
the ranks still agree, as one `Compressed` record (compress.json). Notebook 11 runs
it through comm_lessons.py. Copy the whole folder, not this file: it imports
common.py and comm_model.py.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from comm_model import batch, make_model, parse_args, train_step, wrap
from common import leave, save_record, setup
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.elastic.multiprocessing.errors import record

_ALL_REDUCE = dist.all_reduce  # the real one: count_bytes wraps it for a while


@dataclass
class Hooked:
    """One hook's run."""

    bytes_per_step: float  # handed to all_reduce
    loss: float  # the last step's, on this rank
    rank_spread: float  # largest difference of the weights between ranks


@dataclass
class Compressed:
    """What rank 0 writes to <out>/compress.json (notebook 11 reads it)."""

    float32: Hooked  # DDP's default all-reduce
    bfloat16: Hooked  # bf16_compress_hook
    weight_rel_diff: float  # largest |bf16 - fp32| weight / largest |fp32| weight


def count_bytes(sent: list[int]):
    """Return a stand-in for dist.all_reduce that adds up the bytes it is handed."""
    def all_reduce(tensor, *args, **kwargs):
        sent.append(tensor.numel() * tensor.element_size())
        return _ALL_REDUCE(tensor, *args, **kwargs)

    return all_reduce


def compress(base: nn.Module, device: torch.device, width: int, bsz: int,
             steps: int) -> Compressed:
    """Train two copies, with and without a compressing comm hook; compare them."""
    hooks = {"float32": default_hooks.allreduce_hook,  # nccl sums bf16 on a T4 too
             "bfloat16": default_hooks.bf16_compress_hook}
    result, weights = {}, {}
    for name, hook in hooks.items():
        model = wrap(copy.deepcopy(base), device, cap=25)
        model.register_comm_hook(None, hook)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        sent: list[int] = []
        dist.all_reduce = count_bytes(sent)  # what the hook hands to all_reduce
        try:
            losses = [train_step(model, opt, *batch(width, bsz, s, device))
                      for s in range(steps)]
        finally:
            dist.all_reduce = _ALL_REDUCE
        w = torch.cat([p.detach().flatten() for p in model.parameters()])
        every = [torch.empty_like(w) for _ in range(dist.get_world_size())]
        dist.all_gather(every, w)
        weights[name] = w.cpu()
        result[name] = Hooked(sum(sent) / steps, losses[-1],
                              max((e - w).abs().max().item() for e in every))
    ref, low = weights.values()
    return Compressed(**result, weight_rel_diff=(
        (low - ref).abs().max() / ref.abs().max()).item())


def run(args, device: torch.device) -> Compressed:
    """Compare the two hooks over 10 steps; rank 0 writes the record."""
    result = compress(make_model(args.layers, args.width), device, args.width,
                      args.batch, steps=10)
    if dist.get_rank() == 0:
        save_record(Path(args.out) / "compress.json", result)
    return result


@record  # a crashing rank's traceback reaches torchrun's summary
def main(argv: list[str] | None = None) -> None:
    args = parse_args(__doc__, argv)
    run(args, setup(args.device))
    leave()


if __name__ == "__main__":
    main()
