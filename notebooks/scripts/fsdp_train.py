"""Shard a model with FSDP2 (`fully_shard`) and compare with DDP; start with torchrun.

    torchrun --standalone --nproc-per-node=2 fsdp_train.py --out build/fsdp

Under DDP every rank holds the whole model, its gradients and its optimizer state.
FSDP2 gives each rank one shard (1/world of the rows) of every parameter, as a
DTensor: a block's shards are all-gathered into full weights before it runs, and its
gradients reduce-scattered after backward, so the optimizer updates only the shard.

The script trains the same seeded model from the same batches with FSDP2, with DDP
and (on rank 0) in one process alone, checks in float64 and float32 that all three
end with the same weights, counts each rank's bytes of parameters, gradients and Adam
state, times the steps in turn, and writes it all to OUT/fsdp_w{world}.json. DDP runs
with gradient_as_bucket_view=True, so the bytes counted are all it holds. With one GPU
per process it uses nccl, otherwise gloo on the CPU.

One launch can teach more, since each start of torch costs seconds: `--variants`
(fsdp_variants.py) also trains FSDP2 with other options; `--save-checkpoint D` and
`--load-checkpoint D` (fsdp_checkpoint.py) write and read a sharded checkpoint; `--tp`
(tp_mlp.py) splits every block with tensor parallelism. `--worlds 2,4` runs the
launch as several world sizes in turn: the first 2 ranks compare and save while the
others wait, then all 4 measure one step and reload (`--one-step`: every world does
only that). Only torch and the standard library are used: copy the five files.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
from fsdp_checkpoint import checkpoint
from fsdp_model import (
    Collectives,
    batch,
    build,
    describe,
    full_params,
    max_diff,
    memory,
    nbytes,
    shard,
)
from fsdp_variants import variants
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.elastic.multiprocessing.errors import record
from torch.distributed.tensor import DTensor
from torch.nn.parallel import DistributedDataParallel as DDP
from tp_mlp import tensor_parallel


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Read the command line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="folder for the results")
    p.add_argument("--dim", type=int, default=256, help="width of the blocks")
    p.add_argument("--depth", type=int, default=4, help="number of blocks")
    p.add_argument("--batch-size", type=int, default=32,
                   help="global batch size, split evenly over the processes")
    p.add_argument("--steps", type=int, default=3, help="steps of the equality check")
    p.add_argument("--timed", type=int, default=5, help="timed steps of each model")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--variants", action="store_true",
                   help="also train fsdp_variants.py's options: full weights kept "
                        "after forward, bf16 parameters")
    p.add_argument("--save-checkpoint", default=None, help="write a sharded checkpoint")
    p.add_argument("--load-checkpoint", default=None, help="read a sharded checkpoint")
    p.add_argument("--worlds", default=None,
                   help="world sizes to run in turn on the first ranks, e.g. 2,4: the "
                        "first compares (and saves), the others measure one step (and "
                        "reload the checkpoint); default: all ranks once")
    p.add_argument("--tp", action="store_true",
                   help="also try tensor parallelism on the first world (tp.json)")
    p.add_argument("--threads", type=int,
                   default=int(os.environ.get("OMP_NUM_THREADS", "1")),
                   help="CPU threads per process")
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto",
                   help="auto: one GPU per process if there are enough, else CPU")
    p.add_argument("--one-step", action="store_true",
                   help="every world measures one float32 step (and reloads the "
                        "checkpoint): no float64 proof, no timing")
    return p.parse_args(argv)


class Trainer:
    """One model and its Adam optimizer, stepping on this rank's batches."""

    def __init__(self, model: nn.Module, args, dtype, device, rank, world):
        self.model, self.args, self.dtype, self.device = model, args, dtype, device
        self.rank, self.world, self.steps, self.times = rank, world, 0, []
        self.opt = torch.optim.Adam(model.parameters(), lr=args.lr)
        self.held_after_forward = 0  # bytes of full (unsharded) weights kept
        self.gathered_forward = 0  # bytes the first forward's all-gathers returned

    def step(self, timed: bool = False) -> None:
        """Run forward, backward and the optimizer on the next batch."""
        x, y = batch(self.steps, self.args, self.dtype, self.device, self.rank,
                     self.world)
        self.opt.zero_grad(set_to_none=True)
        sync(self.device)
        t0 = time.perf_counter()
        if self.steps == 0:  # the same every step; measured once, never timed
            with Collectives() as seen:  # the tensors the all-gathers returned
                out = self.model(x)
            self.gathered_forward = sum(seen.sizes("allgather"))
            self.held_after_forward = nbytes(  # plain tensors are unsharded weights
                p for p in self.model.parameters() if not isinstance(p, DTensor))
        else:
            out = self.model(x)
        nn.functional.cross_entropy(out.float(), y).backward()  # FSDP reduce-scatters
        self.opt.step()  # FSDP: Adam updates only this rank's shard
        sync(self.device)
        if timed:
            self.times.append(time.perf_counter() - t0)
        self.steps += 1


def sync(device: torch.device) -> None:
    """Wait for queued GPU work, so that timings are honest."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def compare(args, dtype, device, rank, world, mesh, steps: int,
            timed: int = 0, others: bool = False) -> tuple[dict, dict]:
    """Train FSDP2, DDP and (rank 0) one process alike; return results, models."""
    group = mesh.get_group()  # these ranks' process group
    def trainer(wrap) -> Trainer:
        return Trainer(wrap(build(args, dtype, device)), args, dtype, device, rank,
                       world)

    runs = {"fsdp": trainer(lambda m: shard(m, mesh)),
            "ddp": trainer(lambda m: DDP(m, device_ids=(
                [device.index] if device.type == "cuda" else None),
                process_group=group, gradient_as_bucket_view=True))}  # see memory
    if others:  # FSDP2 with other options, from fsdp_variants.py
        runs.update({name: trainer(wrap) for name, wrap in variants(mesh).items()})
    for i in range(steps + timed):  # alternate the models: load hits them alike
        for run in runs.values():
            dist.barrier(group)  # every rank starts each step together
            run.step(timed=i >= steps)
    res: dict = {name: {"memory": memory(r.model, r.opt),
                        "held_after_forward": r.held_after_forward,
                        "gathered_forward": r.gathered_forward,
                        "step_s": statistics.median(r.times) if r.times else None,
                        "step_samples": r.times}
                 for name, r in runs.items()}
    full = {name: full_params(r.model) for name, r in runs.items()}
    if rank == 0:  # the reference: one process, the whole batch, the same steps
        single = Trainer(build(args, dtype, device), args, dtype, device, 0, 1)
        for _ in range(steps + timed):
            single.step()
        res["single"] = {"memory": memory(single.model, single.opt)}
        ref = full_params(single.model)
        res["fsdp"]["max_diff_single"] = max_diff(full["fsdp"], ref)
        res["fsdp"]["max_diff_ddp"] = max_diff(full["fsdp"], full["ddp"])
        res["ddp"]["max_diff_single"] = max_diff(full["ddp"], ref)
        if others:
            res["fsdp_bf16"]["max_diff_single"] = max_diff(full["fsdp_bf16"], ref)
    return res, {name: r.model for name, r in runs.items()}


def setup(device: str = "auto") -> torch.device:
    """Join the process group torchrun describes; return this rank's device."""
    if "LOCAL_RANK" not in os.environ:
        raise SystemExit(f"start me with torchrun, e.g. torchrun --standalone "
                         f"--nproc-per-node=2 {os.path.basename(sys.argv[0])}")
    local_rank = int(os.environ["LOCAL_RANK"])  # this process's index on its machine
    local_world = int(os.environ["LOCAL_WORLD_SIZE"])  # processes on this machine
    if device == "auto":  # a GPU for every process on this machine, or none
        device = "cuda" if torch.cuda.device_count() >= local_world else "cpu"
    if device == "cuda":
        if local_rank >= torch.cuda.device_count():
            raise SystemExit(f"local rank {local_rank} has no GPU of its own: "
                             f"{torch.cuda.device_count()} visible on this machine")
        dev = torch.device("cuda", local_rank)
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", device_id=dev)  # binds the group to this GPU
        return dev
    dist.init_process_group("gloo")
    atexit.register(time.sleep, 0.2)  # workaround: gloo's threads finish freeing
    return torch.device("cpu")


def run_world(args, rank: int, world: int, device: torch.device, mesh, out: Path,
              first: bool) -> None:
    """Compare FSDP2, DDP and one process on `world` ranks; write fsdp_w{world}.json."""
    results = {"world": world, "backend": dist.get_backend(), "device": device.type}
    # later worlds: one float32 step, memory
    dtypes = [torch.float64, torch.float32] if first else [torch.float32]
    for dtype in dtypes:  # float64 proves the equality, float32 is what we measure
        name = str(dtype).removeprefix("torch.")
        last = dtype == torch.float32
        steps, timed = (args.steps, args.timed if last else 0) if first else (1, 0)
        results[name], models = compare(args, dtype, device, rank, world, mesh,
                                        steps, timed, args.variants and last and first)
    results["shard"] = describe(models["fsdp"], rank, mesh)
    if args.save_checkpoint or args.load_checkpoint:  # save first, reload later
        save = bool(args.save_checkpoint) and first
        path = args.save_checkpoint or args.load_checkpoint
        checkpoint(path, save, models["fsdp"], args, device, rank, mesh, out)
    if args.tp and first:
        tensor_parallel(args, device, rank, mesh, out)
    if rank == 0:
        results["params"] = sum(p.numel() for p in models["ddp"].parameters())
        (out / f"fsdp_w{world}.json").write_text(json.dumps(results, indent=1))
        name = str(dtypes[0]).removeprefix("torch.")
        r = results[name]["fsdp"]
        print(f"{world} rank(s), {results['backend']} on {device.type}: FSDP2 after "
              f"{steps} step(s) vs one process {r['max_diff_single']:.1e}, "
              f"vs DDP {r['max_diff_ddp']:.1e} ({name})")


@record  # a crashing rank's error reaches torchrun, and the launcher's message
def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    device = setup(args.device)
    rank, world = dist.get_rank(), dist.get_world_size()
    worlds = [int(w) for w in args.worlds.split(",")] if args.worlds else [world]
    for size in worlds:
        if not 1 <= size <= world or args.batch_size % size:
            raise SystemExit(f"world {size}: needs 1..{world} ranks and a "
                             f"--batch-size ({args.batch_size}) that divides by it")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for i, size in enumerate(worlds):
        if size == world:
            mesh = init_device_mesh(device.type, (world,))  # NEW: the ranks, 1-D mesh
        else:  # the first `size` ranks; every rank must take part in new_group
            group = dist.new_group(list(range(size)))
            mesh = DeviceMesh.from_group(group, device.type) if rank < size else None
        if rank < size:
            run_world(args, rank, size, device, mesh, out,
                      first=i == 0 and not args.one_step)
        dist.barrier()  # the other ranks wait here, idle
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
