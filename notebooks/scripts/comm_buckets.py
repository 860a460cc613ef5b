"""DDP's gradient buckets, their overlap with backward, compression and uneven inputs.

    TORCH_FR_BUFFER_SIZE=2000 torchrun --standalone --nproc-per-node=2 \
        comm_buckets.py --out build/comm

An MLP of --layers square Linear layers (each 256 KiB of float32 gradients, plus
its bias, at the default width 256) is trained with DDP. The script writes to --out:
- buckets.json: the buckets a comm hook saw (GradBucket.index and bytes) for each
  --caps value of bucket_cap_mb, the parameters' bytes, and the step times of the
  caps in interleaved rounds, timed on copies without a hook (DDP's own C++
  all-reduce: a Python hook would add its cost to every bucket);
- trace_ddp.json, trace_by_hand.json (rank 0): profiler traces of one step of DDP
  (the smallest buckets, on a larger batch: --profile-batch) and of one step that
  averages the gradients by hand after backward, and overlap.json: the share of
  all-reduce time that ran during backward in each;
- compress.json: bytes handed to all_reduce per step with and without
  bf16_compress_hook, and how far the weights moved (gloo and nccl reduce bfloat16
  on every device; torch.cuda.is_bf16_supported is about computing in it);
- uneven.json and fr_rank<r>.json: ranks with different numbers of batches, first
  without Join (a hang, ended by a short timeout; the Flight Recorder's entries of
  the hung group, where this torch has one), then with Join.
--collectives first runs comm_collectives.py's parts in the same processes. Notebook 11
runs it. Copy the whole folder, not this file: it imports comm_collectives.py and
common.py.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import datetime
import json
import pickle
import statistics
import time
from pathlib import Path

import comm_collectives
import torch
import torch.distributed as dist
from common import clock, setup
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.join import Join
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile, record_function

_ALL_REDUCE = dist.all_reduce  # the real one: count_bytes wraps it for a while


def make_model(layers: int, width: int, seed: int = 0) -> nn.Sequential:
    """Return `layers` Linear(width, width) layers with ReLUs between them."""
    torch.manual_seed(seed)
    mods: list[nn.Module] = []
    for i in range(layers):
        mods += [nn.Linear(width, width)] + ([nn.ReLU()] if i < layers - 1 else [])
    return nn.Sequential(*mods)


def wrap(model: nn.Module, device: torch.device, cap: float, group=None) -> DDP:
    """Return `model` on `device` in DDP; a bucket closes once it reaches `cap` MiB."""
    return DDP(model.to(device), bucket_cap_mb=cap, process_group=group,
               device_ids=[device.index] if device.type == "cuda" else None)


def batch(width: int, size: int, step: int, device: torch.device):
    """Return this rank's synthetic (input, target) for `step`."""
    g = torch.Generator().manual_seed(1000 * step + dist.get_rank())
    x = torch.randn(size, width, generator=g)
    return x.to(device), x.flip(1).to(device)  # learn to reverse the features


def train_step(model: nn.Module, opt: torch.optim.Optimizer, x, y) -> float:
    """Run one SGD step on (x, y); return the loss."""
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.item()


def seen_buckets(model: DDP, x, y) -> list[tuple[int, int]]:
    """Return (GradBucket.index(), bytes) of every bucket in one backward."""
    seen = []

    def hook(state, bucket):  # no annotations: DDP checks them, and they are strings
        buf = bucket.buffer()  # this bucket's gradients, flattened into one tensor
        seen.append((bucket.index(), buf.numel() * buf.element_size()))
        return default_hooks.allreduce_hook(state, bucket)  # DDP's usual all-reduce

    model.register_comm_hook(None, hook)
    for _ in range(2):  # DDP rebuilds its buckets after the first backward
        seen.clear()
        nn.functional.mse_loss(model(x), y).backward()
    model.zero_grad(set_to_none=True)
    return seen[:]  # the hook stays (later steps use it too), its record stops here


def time_caps(models: dict[float, DDP], x, y, rounds: int, steps: int,
              device: torch.device) -> dict[float, list[float]]:
    """Return each cap's median step seconds per round; rounds interleave the caps."""
    opts = {cap: torch.optim.SGD(m.parameters(), lr=1e-3) for cap, m in models.items()}
    times: dict[float, list[float]] = {cap: [] for cap in models}
    for r in range(rounds):
        order = list(models) if r % 2 == 0 else list(models)[::-1]
        for cap in order:
            runs = []
            for i in range(steps + 1):  # one warm-up step
                dist.barrier()
                start = clock(device)
                train_step(models[cap], opts[cap], x, y)
                if i:
                    runs.append(clock(device) - start)
            times[cap].append(statistics.median(runs))
    return times


def profile_step(model: nn.Module, x, y, by_hand: bool, path: Path) -> None:
    """Profile forward and backward (plus the averaging, if by hand); save a trace."""
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if x.is_cuda else [])
    rank0 = dist.get_rank() == 0  # the others run the same step, unprofiled
    with profile(activities=acts) if rank0 else contextlib.nullcontext() as prof:
        with record_function("forward"):
            loss = nn.functional.mse_loss(model(x), y)
        with record_function("backward"):
            loss.backward()  # DDP: all-reduces start as buckets fill
        if by_hand:
            with record_function("average by hand"):
                for p in model.parameters():  # an all-reduce per tensor, after backward
                    dist.all_reduce(p.grad)
                    p.grad /= dist.get_world_size()
        clock(x.device)
    model.zero_grad(set_to_none=True)
    if rank0:
        prof.export_chrome_trace(str(path))


def _is_comm(e: dict) -> bool:
    """True for an all-reduce's own time: gloo's thread on CPU, nccl's kernel on GPU."""
    return e["name"] == "gloo:all_reduce" or (
        e.get("cat") == "kernel" and "nccl" in e["name"].lower())


def overlap_fraction(trace: dict) -> float:
    """Return the share of all-reduce time that ran while backward still computed.

    Backward computes from the start of the "backward" label to the end of the last
    autograd function on the CPU, or of the last GPU kernel launched during it.
    """
    events = [e for e in trace["traceEvents"] if e.get("ph") == "X" and "dur" in e]
    label = next(e for e in events  # the CPU's label, not its copy on a GPU row
                 if e["name"] == "backward" and e.get("cat") == "user_annotation")
    start, stop = label["ts"], label["ts"] + label["dur"]
    launched = {e["args"]["correlation"] for e in events  # kernel launches in it
                if e.get("cat") in ("cuda_runtime", "cuda_driver")
                and start <= e["ts"] <= stop and "correlation" in e.get("args", {})}
    compute = [e for e in events if not _is_comm(e) and (
        e["name"].startswith("autograd::engine::evaluate_function") or (
            e.get("cat") == "kernel" and e["args"].get("correlation") in launched))]
    end = max(e["ts"] + e["dur"] for e in compute)
    comm = [e for e in events if _is_comm(e)]
    during = sum(max(0.0, min(e["ts"] + e["dur"], end) - max(e["ts"], start))
                 for e in comm)
    return during / sum(e["dur"] for e in comm)


def count_bytes(sent: list[int]):
    """Return a stand-in for dist.all_reduce that adds up the bytes it is handed."""
    def all_reduce(tensor, *args, **kwargs):
        sent.append(tensor.numel() * tensor.element_size())
        return _ALL_REDUCE(tensor, *args, **kwargs)

    return all_reduce


def compress(base: nn.Module, device: torch.device, width: int, bsz: int,
             steps: int) -> dict:
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
        result[name] = {"bytes_per_step": sum(sent) / steps, "loss": losses[-1],
                        "rank_spread": max((e - w).abs().max().item() for e in every)}
    ref, low = weights.values()
    result["weight_rel_diff"] = ((low - ref).abs().max() / ref.abs().max()).item()
    return result


def uneven(base: nn.Module, device: torch.device, width: int, bsz: int,
           timeout: float, out: Path) -> dict:
    """Rank r trains on 2 + N-1-r batches: first without Join (a hang), then with."""
    rank, world = dist.get_rank(), dist.get_world_size()
    mine = 2 + world - 1 - rank  # rank 0 has the most batches, the last rank 2
    # gloo on every machine (as ddp_hang.py): nccl's watchdog would end the process
    short = dist.new_group(backend="gloo", timeout=datetime.timedelta(seconds=timeout))
    model = wrap(copy.deepcopy(base), device, cap=25, group=short)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    result = {"batches": mine, "hang": None}
    recorded = out / f"fr_rank{rank}.json"
    recorded.unlink(missing_ok=True)  # an earlier run's record is not this one's
    start = time.monotonic()
    try:
        for s in range(mine):
            train_step(model, opt, *batch(width, bsz, s, device))
        dist.barrier(group=short)  # "all done": the ranks with fewer batches wait here
    except RuntimeError as err:  # the short timeout ends the hang
        result["hang"] = {"seconds": time.monotonic() - start,
                          "error": str(err).split("\n")[0][:200]}
    fr = getattr(torch._C._distributed_c10d, "_dump_fr_trace", None)
    if fr is not None:  # the Flight Recorder: the last collectives of each group
        entries = pickle.loads(fr()).get("entries", [])
        keep = ("collective_seq_id", "profiling_name", "input_sizes", "state")
        recorded.write_text(json.dumps(
            [{k: e.get(k) for k in keep} for e in entries
             if e.get("process_group", [None])[0] == short.group_name]))
    joined = dist.new_group(backend="gloo")  # a fresh group: the hung one is done
    model = wrap(copy.deepcopy(base), device, cap=25, group=joined)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with Join([model]):  # a rank that runs out of batches shadows the others' steps
        for s in range(mine):
            train_step(model, opt, *batch(width, bsz, s, device))
    w = torch.cat([p.detach().flatten() for p in model.parameters()])
    every = [torch.empty_like(w) for _ in range(world)]
    dist.all_gather(every, w, group=joined)
    result["join_rank_spread"] = max((e - w).abs().max().item() for e in every)
    return result


@record  # a crashing rank's traceback reaches torchrun's summary
def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="build/comm", help="folder for the results")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--width", type=int, default=256)
    p.add_argument("--batch", type=int, default=64, help="samples per rank and step")
    p.add_argument("--profile-batch", type=int, default=512,
                   help="samples per rank in the profiled steps")
    p.add_argument("--caps", default="0.25,1,25", help="bucket_cap_mb values (MiB)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--steps", type=int, default=2, help="timed steps per cap and round")
    p.add_argument("--timeout", type=float, default=3.0,
                   help="seconds before the uneven run without Join gives up")
    p.add_argument("--collectives", action="store_true",
                   help="first run comm_collectives.py's parts in the same processes")
    args = p.parse_args(argv)
    device = setup(args.device)
    rank = dist.get_rank()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.collectives:  # one launch for both scripts: each launch costs seconds
        comm_collectives.run(out, device)
    base = make_model(args.layers, args.width)
    x, y = batch(args.width, args.batch, 0, device)
    caps = [float(c) for c in args.caps.split(",")]
    buckets = {cap: seen_buckets(wrap(copy.deepcopy(base), device, cap), x, y)
               for cap in caps}  # the hook stays on those copies: not timed
    models = {cap: wrap(copy.deepcopy(base), device, cap) for cap in caps}
    times = time_caps(models, x, y, args.rounds, args.steps, device)
    xp, yp = batch(args.width, args.profile_batch, 1, device)  # more compute
    profile_step(models[min(caps)], xp, yp, by_hand=False, path=out / "trace_ddp.json")
    profile_step(copy.deepcopy(base).to(device), xp, yp, by_hand=True,
                 path=out / "trace_by_hand.json")
    squeezed = compress(base, device, args.width, args.batch, steps=10)
    odd = uneven(base, torch.device("cpu"), args.width, args.batch, args.timeout, out)
    report = [None] * dist.get_world_size()
    dist.all_gather_object(report, odd)
    if rank == 0:
        overlap = {name: overlap_fraction(json.loads((out / f"trace_{name}.json")
                                                     .read_text()))
                   for name in ("ddp", "by_hand")}
        (out / "overlap.json").write_text(json.dumps(overlap))
        (out / "buckets.json").write_text(json.dumps({
            "backend": dist.get_backend(), "device": device.type,
            "param_bytes": [q.numel() * q.element_size() for q in base.parameters()],
            "buckets": buckets, "step_seconds": times}))
        (out / "compress.json").write_text(json.dumps(squeezed))
        (out / "uneven.json").write_text(json.dumps(report))
        print(f"{dist.get_world_size()} ranks, {dist.get_backend()} on {device.type}: "
              + ", ".join(f"bucket_cap_mb={c:g}: {len(b)} bucket(s)"
                          for c, b in buckets.items()))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
