"""FSDP2 x tensor parallelism on a 2 x 2 mesh of 4 ranks, then FSDP2 on 2; torchrun.

    torchrun --standalone --nproc-per-node=4 gpt_mesh.py --out build/gpt

First the memory of the build: the largest bytes one rank holds while it builds and
initialises a deeper model the meta way (gpt_fsdp.build) or the naive way (the whole
model, then shards). Then a 2-D mesh ("dp", "tp"): Megatron's split inside each block
(ColwiseParallel for q, k, v and mlp.fc, RowwiseParallel for attn.proj and mlp.proj),
sequence parallelism for the norms, the embedding and head split over the vocabulary
so that `loss_parallel` takes the cross-entropy of sharded logits, then FSDP2 over
"dp". It trains in float64, saves model and Adam state with DCP at step --steps
(timing all but the first) and trains --more steps: OUT/mesh_r{rank}.pt. Then ranks 0
and 1 run gpt_fsdp.py's lessons and resume the checkpoint on their own layout
(gpt_resume.py), OUT/fsdp_r{rank}.pt, while ranks 2 and 3 wait. Needs gpt.py,
gpt_fsdp.py and gpt_resume.py.
"""

from __future__ import annotations

import argparse
import atexit
import logging
import os
import statistics
import sys
import time
from pathlib import Path

import gpt
import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from fsdp_model import nbytes
from gpt_fsdp import (
    Traffic,
    adam,
    build,
    full_state,
    gpu_peak,
    lessons,
    state_bytes,
    strategies,
    train,
)
from gpt_resume import resume
from torch.distributed.checkpoint.state_dict import get_state_dict
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import Replicate, Shard
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    RowwiseParallel,
    SequenceParallel,
    loss_parallel,
    parallelize_module,
)


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


def peak_bytes(fn, device) -> int:
    """Return the most bytes allocated at once while `fn()` runs, above the start."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        start = torch.cuda.memory_allocated(device)
        fn()
        return torch.cuda.max_memory_allocated(device) - start
    saved = os.dup(2)  # workaround: the profiler logs a CUDA probe to stderr
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
    try:  # the profiler without kineto: nothing to start up, the same allocations
        with torch.autograd.profiler.profile(use_kineto=False,
                                             profile_memory=True) as prof:
            fn()
    finally:
        os.dup2(saved, 2)
    now = top = 0  # each op's allocations less its frees, in the order they ran
    for e in sorted(prof.function_events, key=lambda e: e.time_range.start):
        now += e.self_cpu_memory_usage
        top = max(top, now)
    return top


def build_memory(device, mesh) -> dict:
    """§1: the peak of a meta build and of a naive build, in a deeper model."""
    cfg = gpt.Config(layers=8)  # deeper: one parameter is a small part of the model
    full = gpt.count_params(gpt.GPT(cfg)) * 4  # float32 bytes of the whole model

    def naive():
        model = gpt.GPT(cfg).to(device)  # the whole model on every rank
        gpt.init_weights(model)
        for block in model.blocks:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)

    meta = peak_bytes(lambda: build(cfg, torch.float32, device, mesh), device)
    return {"full": full, "meta": meta, "naive": peak_bytes(naive, device),
            "largest": max(p.numel() for p in gpt.GPT(cfg).parameters()) * 4}


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", required=True, help="folder for the results")
    p.add_argument("--steps", type=int, default=3, help="steps before the save")
    p.add_argument("--more", type=int, default=2, help="steps after the save")
    p.add_argument("--device", choices=["auto", "cuda", "cpu"], default="auto")
    args = p.parse_args(argv)
    if args.steps < 2 or args.more < 1:  # a timed step after the first; a step after
        p.error(f"need --steps >= 2 and --more >= 1, got {args.steps}, {args.more}")
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    # quiet: gathering a 2-D DTensor whole (full_tensor) takes 2 steps, said each time
    logging.getLogger("torch.distributed.tensor._redistribute").setLevel(logging.ERROR)
    device = setup(args.device)
    rank, out = dist.get_rank(), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    res = {"build": build_memory(device, init_device_mesh(device.type, (4,))),
           "steps": args.steps}
    mesh = init_device_mesh(device.type, (2, 2), mesh_dim_names=("dp", "tp"))  # NEW
    dp = (mesh["dp"].get_local_rank(), 2)  # which half of the batch this rank takes
    cfg, data, k = gpt.Config(), gpt.corpus(), args.steps

    def mesh_model(dtype):
        return build(cfg, dtype, device, mesh["dp"],  # NEW: FSDP2 over "dp" only
                     parallelize=lambda m: tensor_parallel(m, mesh["tp"]))

    model = mesh_model(torch.float64)
    opt = adam(model)
    res["placements"] = {n: [str(pl) for pl in q.placements]
                         for n, q in model.named_parameters()}
    res["local"] = nbytes(model.parameters())
    times, _ = [], gpu_peak(device, reset=True)  # from here: the mesh's peak
    with Traffic() as traffic:  # the first step: counted, and a warm-up
        train(model, opt, data, 1, dp=dp, loss_context=loss_parallel)  # NEW
    train(model, opt, data, k - 1, first=1, dp=dp, loss_context=loss_parallel,
          times=times)
    res["mesh"] = {"step_s": statistics.median(times), "samples": times,
                   "traffic": traffic.bytes, "calls": traffic.calls,
                   "bytes": state_bytes(model, opt), "peak": gpu_peak(device)}
    res["mesh_k"] = gpt.full_params(model)
    res["mesh_k_state"] = full_state(model, opt)  # weights and Adam, from the tensors
    msd, osd = get_state_dict(model, opt)  # NEW: this rank's shards, by name
    dcp.save({"model": msd, "optim": osd}, checkpoint_id=out / "ckpt")  # NEW
    train(model, opt, data, args.more, first=k, dp=dp, loss_context=loss_parallel)
    res["mesh_km"] = gpt.full_params(model)
    group = dist.new_group([0, 1])  # another layout: FSDP2 alone, on ranks 0 and 1
    if rank < 2:
        pair = DeviceMesh.from_group(group, device.type)
        two = {**lessons(cfg, data, device, pair, rank, 2, k),
               "strategies": strategies(cfg, data, device, pair, rank, 2, k),
               "resume": resume(cfg, data, device, pair, (rank, 2), out / "ckpt", k,
                                args.more)}
        torch.save(two, out / f"fsdp_r{rank}.pt")
    torch.save(res, out / f"mesh_r{rank}.pt")
    print(f"rank {rank}: done, results in {out}")
    dist.barrier()  # ranks 2 and 3 wait here
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
