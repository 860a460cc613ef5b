"""Shard a model with FSDP2 (`fully_shard`) and compare with DDP (notebook 14, §1-§2).

    torchrun --standalone --nproc-per-node=2 fsdp_train.py --out build/fsdp

Under DDP every rank holds the whole model, its gradients and its optimizer state.
FSDP2 gives each rank one shard (1/world of the rows) of every parameter, as a
DTensor: a block's shards are all-gathered into full weights before it runs, and its
gradients reduce-scattered after backward, so the optimizer updates only the shard.

The lesson trains the same seeded model from the same batches with FSDP2, with DDP
and (on rank 0) in one process alone, checks in float64 and float32 that all three
end with the same weights, counts each rank's bytes of parameters, gradients and Adam
state, times the steps in turn, and writes a `Compared` record to
OUT/fsdp_w{world}.json. DDP runs with gradient_as_bucket_view=True, so the bytes
counted are all it holds. `--one-step`: one float32 step, the bytes only.

Notebook 14 runs it through fsdp_lessons.py, in one launch with the family's other
lessons. It imports fsdp_model.py and common.py: copy the folder, not this file.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import torch
import torch.distributed as dist
from common import full_state, leave, log, max_diff, save_record
from fsdp_model import (
    Trainer,
    add_model_args,
    alone,
    build,
    describe,
    join,
    memory,
    race,
    shard,
)
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP


@dataclasses.dataclass
class Compared:
    """What one world size showed (float32 unless named float64)."""

    world: int
    backend: str
    device: str
    params: int  # parameters of the model
    steps: int  # float32 steps each model took
    shard: dict  # blocks[0].up.weight: type, placements, shape, local_shapes
    memory: dict[str, dict[str, int]]  # fsdp, ddp, single: params, grads, optimizer
    held_after_forward: dict[str, int]  # bytes of full weights a rank kept
    gathered_forward: dict[str, int]  # bytes the forward's all-gathers returned
    step_s: dict[str, list[float]]  # fsdp, ddp: the timed steps, taken in turn
    max_diff_single: float | None = None  # float64: FSDP2 vs one process
    max_diff_ddp: float | None = None  # float64: FSDP2 vs DDP
    ddp_max_diff_single: float | None = None  # float64: DDP vs one process
    max_diff_single_f32: float | None = None  # float32: FSDP2 vs one process
    max_diff_ddp_f32: float | None = None  # float32: FSDP2 vs DDP
    steps_f64: int = 0  # float64 steps before max_diff_single and max_diff_ddp


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Read the command line."""
    p = add_model_args(argparse.ArgumentParser(description=__doc__.split("\n")[0]))
    p.add_argument("--one-step", action="store_true",
                   help="one float32 step, the bytes only: no proof, no timing")
    return p.parse_args(argv)


def compare(args, dtype, device, mesh, steps: int, timed: int = 0):
    """Train FSDP2, DDP and (rank 0) one process alike; return trainers, diffs."""
    rank, world, group = dist.get_rank(), mesh.size(), mesh.get_group()
    ids = [device.index] if device.type == "cuda" else None
    runs = {"fsdp": shard(build(args, dtype, device), mesh),  # NEW
            "ddp": DDP(build(args, dtype, device), device_ids=ids, process_group=group,
                       gradient_as_bucket_view=True)}  # see fsdp_model.memory
    runs = {name: Trainer(m, args, dtype, device, rank, world)
            for name, m in runs.items()}
    race(runs, steps, timed, group)
    full = {name: full_state(r.model) for name, r in runs.items()}  # every rank
    diffs = {}
    if rank == 0:  # the reference: one process, the whole batch, the same steps
        runs["single"] = alone(args, dtype, device, steps + timed)
        ref = full_state(runs["single"].model)
        diffs = {"single": max_diff(full["fsdp"], ref),
                 "ddp": max_diff(full["fsdp"], full["ddp"]),
                 "ddp_single": max_diff(full["ddp"], ref)}
    return runs, diffs


def run(args: argparse.Namespace, device: torch.device, mesh) -> Compared:
    """Compare FSDP2, DDP and one process on the mesh's ranks; write the record."""
    rank, world = dist.get_rank(mesh.get_group()), mesh.size()
    d64 = {}
    if not args.one_step:  # float64 proves the equality, float32 is what we measure
        _, d64 = compare(args, torch.float64, device, mesh, args.steps)
    steps, timed = (1, 0) if args.one_step else (args.steps, args.timed)
    runs, d32 = compare(args, torch.float32, device, mesh, steps, timed)
    result = Compared(
        world=world, backend=dist.get_backend(mesh.get_group()), device=device.type,
        params=sum(p.numel() for p in runs["ddp"].model.parameters()),
        steps=steps + timed, shard=describe(runs["fsdp"].model, rank, mesh),
        memory={name: memory(r.model, r.opt) for name, r in runs.items()},
        held_after_forward={n: runs[n].held_after_forward for n in ("fsdp", "ddp")},
        gathered_forward={n: runs[n].gathered_forward for n in ("fsdp", "ddp")},
        step_s={n: runs[n].times for n in ("fsdp", "ddp")},
        max_diff_single=d64.get("single"), max_diff_ddp=d64.get("ddp"),
        ddp_max_diff_single=d64.get("ddp_single"),
        max_diff_single_f32=d32.get("single"), max_diff_ddp_f32=d32.get("ddp"),
        steps_f64=0 if args.one_step else args.steps)
    if rank == 0:
        save_record(Path(args.out) / f"fsdp_w{world}.json", result)
        d, n, kind = ((d32, steps, "float32") if args.one_step else
                      (d64, args.steps, "float64"))
        log(f"{world} rank(s), {result.backend} on {device.type}: FSDP2 after {n} "
            f"step(s) vs one process {d['single']:.1e}, vs DDP {d['ddp']:.1e} ({kind})")
    return result


@record  # a crashing rank's error reaches torchrun, and the launcher's message
def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    device, mesh = join(args)
    run(args, device, mesh)
    leave()


if __name__ == "__main__":
    main()
