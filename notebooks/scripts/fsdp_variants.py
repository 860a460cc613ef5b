"""What FSDP2's options trade, trained beside plain FSDP2 (notebook 14, §3).

    torchrun --standalone --nproc-per-node=2 fsdp_variants.py --out build/fsdp

`reshard_after_forward=False` keeps each block's full weights from its forward to its
backward: one all-gather fewer per block and step, but after forward every block's
full weights are in memory. A bf16 `MixedPrecisionPolicy` casts the shards before the
all-gather, so half the bytes travel, and reduce-scatters the gradients in float32.
The three train in turn in float32; each one's step times, the bytes its first
forward's all-gathers returned and the full weights it kept after forward, and (rank
0) its weights against one process's go to OUT/variants.json, a `Variants` record.

Notebook 14 runs it through fsdp_lessons.py. It imports fsdp_model.py and common.py:
copy the folder, not this file.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from pathlib import Path

import torch
import torch.distributed as dist
from common import full_state, leave, log, max_diff, save_record
from fsdp_model import (
    ResidualMLP,
    Trainer,
    add_model_args,
    alone,
    build,
    join,
    race,
    shard,
)
from torch.distributed.elastic.multiprocessing.errors import record
from torch.distributed.fsdp import MixedPrecisionPolicy


@dataclasses.dataclass
class Variants:
    """Plain FSDP2 and two options, by name: fsdp, fsdp_keep, fsdp_bf16 (float32)."""

    world: int
    device: str
    step_s: dict[str, list[float]]  # the timed steps, taken in turn
    held_after_forward: dict[str, int]  # bytes of full weights kept after forward
    gathered_forward: dict[str, int]  # bytes the first forward's all-gathers returned
    max_diff_single: dict[str, float]  # weights vs one process, after the same steps


def variants(mesh) -> dict[str, Callable[[ResidualMLP], ResidualMLP]]:
    """Return FSDP2 with other options: full weights kept, bf16 parameters."""
    bf16 = MixedPrecisionPolicy(param_dtype=torch.bfloat16,  # NEW: gathered in bf16
                                reduce_dtype=torch.float32)  # NEW: summed in float32
    return {"fsdp_keep": lambda m: shard(m, mesh, reshard_after_forward=False),  # NEW
            "fsdp_bf16": lambda m: shard(m, mesh, mp_policy=bf16)}  # NEW


def run(args: argparse.Namespace, device: torch.device, mesh) -> Variants:
    """Train plain FSDP2 and the variants in turn on the mesh; write the record."""
    rank, f32 = dist.get_rank(), torch.float32
    wraps = {"fsdp": lambda m: shard(m, mesh), **variants(mesh)}
    runs = {name: Trainer(wrap(build(args, f32, device)), args, f32, device, rank,
                          mesh.size()) for name, wrap in wraps.items()}
    race(runs, args.steps, args.timed, mesh.get_group())
    full = {name: full_state(r.model) for name, r in runs.items()}  # every rank
    if rank == 0:
        ref = full_state(alone(args, f32, device, args.steps + args.timed).model)
        result = Variants(
            world=mesh.size(), device=device.type,
            step_s={n: r.times for n, r in runs.items()},
            held_after_forward={n: r.held_after_forward for n, r in runs.items()},
            gathered_forward={n: r.gathered_forward for n, r in runs.items()},
            max_diff_single={n: max_diff(w, ref) for n, w in full.items()})
        save_record(Path(args.out) / "variants.json", result)
        log(f"FSDP2 options on {mesh.size()} ranks: all-gathered per forward "
            f"{result.gathered_forward}")
        return result
    return None


@record  # a crashing rank's error reaches torchrun, and the launcher's message
def main(argv: list[str] | None = None) -> None:
    args = add_model_args(argparse.ArgumentParser(
        description=__doc__.split("\n")[0])).parse_args(argv)
    device, mesh = join(args)
    run(args, device, mesh)
    leave()


if __name__ == "__main__":
    main()
