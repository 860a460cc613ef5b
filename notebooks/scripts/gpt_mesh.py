"""FSDP2 x tensor parallelism on a 2 x 2 mesh of 4 ranks (notebook 16, §5).

    torchrun --standalone --nproc-per-node=4 gpt_mesh.py --out build/gpt

A 2-D mesh ("dp", "tp"): Megatron's split inside each block (ColwiseParallel for q, k,
v and mlp.fc, RowwiseParallel for attn.proj and mlp.proj), sequence parallelism for
the norms, the embedding and head split over the vocabulary so that `loss_parallel`
takes the cross-entropy of sharded logits, then FSDP2 over "dp". It trains in float64,
saves model and Adam state with DCP at step --steps to OUT/ckpt (timing all but the
first step) and trains --more steps; each rank writes its results, weights among
them, to OUT/mesh_r{rank}.pt (a MeshRun record). Notebook 16 runs it through
gpt_lessons.py, which then resumes the checkpoint on another layout (gpt_resume.py).
It imports gpt.py, gpt_fsdp.py and common.py: copy the folder, not this file.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
from dataclasses import dataclass
from pathlib import Path

import gpt
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from common import Traffic, full_state, leave, nbytes, save_record, setup
from gpt_fsdp import (
    adam,
    build,
    gathered_state,
    gpu_peak,
    gpu_reset,
    state_bytes,
    train,
)
from torch.distributed.checkpoint.state_dict import get_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.elastic.multiprocessing.errors import record
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    loss_parallel,
    parallelize_module,
)


@dataclass
class MeshRun:
    """What each rank writes to OUT/mesh_r{rank}.pt (notebook 16 reads them)."""

    steps: int  # k, the step the checkpoint holds
    placements: dict[str, list[str]]  # each parameter's, on the 2 x 2 mesh
    local: int  # this rank's bytes of parameters
    mesh: dict  # step_s, samples, traffic, calls, bytes, peak (as strategies')
    mesh_k: dict[str, torch.Tensor]  # whole weights at step k
    mesh_k_state: dict[str, torch.Tensor]  # weights and Adam state at k, by hand
    mesh_km: dict[str, torch.Tensor]  # whole weights --more steps later


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Read the command line: the steps before and after the checkpoint."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="folder for the results")
    p.add_argument("--steps", type=int, default=3, help="steps before the save")
    p.add_argument("--more", type=int, default=2, help="steps after the save")
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    args = p.parse_args(argv)
    if args.steps < 2 or args.more < 1:  # a timed step after the first; a step after
        p.error(f"need --steps >= 2 and --more >= 1, got {args.steps}, {args.more}")
    return args


def quiet() -> None:
    """Set the threads; quiet DTensor's note that a 2-D gather takes two steps."""
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    logging.getLogger("torch.distributed.tensor._redistribute").setLevel(logging.ERROR)


def tensor_parallel(model: gpt.GPT, tp) -> None:
    """Split every layer over the `tp` ranks; activations between blocks by sequence."""
    def gather():  # a sub-layer needs the whole sequence: all-gather the shards
        return PrepareModuleInput(input_layouts=(Shard(1),),
                                  desired_input_layouts=(Replicate(),))

    parallelize_module(model, tp, {  # NEW: vocabulary-parallel embedding and head
        "tok": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),  # NEW: each rank normalises its tokens
        "head": ColwiseParallel(input_layouts=Shard(1), output_layouts=Shard(-1),
                                use_local_output=False)})  # for loss_parallel
    for block in model.blocks:
        parallelize_module(block, tp, {
            "norm1": SequenceParallel(), "attn": gather(),
            "attn.q": ColwiseParallel(), "attn.k": ColwiseParallel(),  # NEW: heads
            "attn.v": ColwiseParallel(),  # split: each rank attends with its own
            "attn.proj": RowwiseParallel(output_layouts=Shard(1)),  # reduce-scatter
            "norm2": SequenceParallel(), "mlp": gather(),
            "mlp.fc": ColwiseParallel(), "mlp.proj": RowwiseParallel(
                output_layouts=Shard(1))})
    model.head.weight = model.tok.weight  # tie again: both are Shard(0) of vocab


def run(args: argparse.Namespace, device: torch.device) -> MeshRun:
    """Train the 2 x 2 mesh, save its checkpoint, train on; write OUT/mesh_r{rank}."""
    if dist.get_world_size() != 4:
        raise SystemExit(f"a 2 x 2 mesh needs 4 ranks, not {dist.get_world_size()}")
    rank, out = dist.get_rank(), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    mesh = init_device_mesh(device.type, (2, 2), mesh_dim_names=("dp", "tp"))  # NEW
    dp = (mesh["dp"].get_local_rank(), 2)  # which half of the batch this rank takes
    cfg, data, k = gpt.Config(), gpt.corpus(), args.steps
    held = gpu_reset(device)  # from here: the mesh's peak, build included, as §8's
    model = build(cfg, torch.float64, device, mesh["dp"],  # NEW: FSDP2 over "dp"
                  parallelize=lambda m: tensor_parallel(m, mesh["tp"]))  # NEW
    opt = adam(model)
    res = {"steps": k, "placements": {n: [str(pl) for pl in q.placements]
                                      for n, q in model.named_parameters()},
           "local": nbytes(model.parameters())}
    times = []
    with Traffic() as traffic:  # the first step: counted, and a warm-up
        train(model, opt, data, 1, dp=dp, loss_context=loss_parallel)  # NEW
    train(model, opt, data, k - 1, first=1, dp=dp, loss_context=loss_parallel,
          times=times)
    res["mesh"] = {"step_s": statistics.median(times), "samples": times,
                   "traffic": traffic.bytes, "calls": traffic.calls,
                   "bytes": state_bytes(model, opt), "peak": gpu_peak(device, held)}
    res["mesh_k"] = full_state(model)  # every rank gathers the 2-D shards
    res["mesh_k_state"] = gathered_state(model, opt)  # weights and Adam, by hand
    msd, osd = get_state_dict(model, opt)  # NEW: this rank's shards, by name
    dcp.save({"model": msd, "optim": osd}, checkpoint_id=out / "ckpt")  # NEW
    train(model, opt, data, args.more, first=k, dp=dp, loss_context=loss_parallel)
    res["mesh_km"] = full_state(model)
    res = MeshRun(**res)
    save_record(out / f"mesh_r{rank}.pt", res)
    return res


@record  # a crashing rank's error reaches torchrun, and the launcher's message
def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    quiet()
    run(args, setup(args.device))
    leave()


if __name__ == "__main__":
    main()
