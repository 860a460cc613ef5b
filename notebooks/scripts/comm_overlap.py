"""DDP overlaps its all-reduces with backward; averaging by hand afterwards cannot.

    torchrun --standalone --nproc-per-node=2 comm_overlap.py --out build/comm

Rank 0 profiles one step of DDP with the smallest buckets (--caps' least, on a larger
batch: --profile-batch) and one step that averages the gradients by hand after
backward, writes both traces (trace_ddp.json, trace_by_hand.json), and the share of
all-reduce time that ran while backward still computed, as one `Overlap` record
(overlap.json). Notebook 11 runs it through comm_lessons.py. Copy the whole folder,
not this file: it imports common.py and comm_model.py.
"""

from __future__ import annotations

import contextlib
import copy
import json
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
from comm_model import batch, make_model, parse_args, train_step, wrap
from common import clock, leave, save_record, setup
from torch import nn
from torch.distributed.elastic.multiprocessing.errors import record
from torch.profiler import ProfilerActivity, profile, record_function


@dataclass
class Overlap:
    """What rank 0 writes to <out>/overlap.json: all-reduce time during backward."""

    cap_mb: float  # DDP's bucket_cap_mb in the profiled step
    ddp: float  # share of DDP's all-reduce time that overlapped backward
    by_hand: float  # the same, averaging by hand after backward


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


def run(args, device: torch.device) -> Overlap | None:
    """Profile a warm DDP step and one averaged by hand; rank 0 writes the record."""
    out, cap = Path(args.out), min(float(c) for c in args.caps.split(","))
    base = make_model(args.layers, args.width)
    ddp = wrap(copy.deepcopy(base), device, cap)
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-3)
    for step in range(2):  # DDP rebuilds its buckets after the first backward
        train_step(ddp, opt, *batch(args.width, args.batch, step, device))
    xp, yp = batch(args.width, args.profile_batch, 1, device)  # more compute
    profile_step(ddp, xp, yp, by_hand=False, path=out / "trace_ddp.json")
    profile_step(copy.deepcopy(base).to(device), xp, yp, by_hand=True,
                 path=out / "trace_by_hand.json")
    if dist.get_rank() != 0:
        return None
    share = {name: overlap_fraction(json.loads((out / f"trace_{name}.json")
                                               .read_text()))
             for name in ("ddp", "by_hand")}
    result = Overlap(cap, **share)
    save_record(out / "overlap.json", result)
    return result


@record  # a crashing rank's traceback reaches torchrun's summary
def main(argv: list[str] | None = None) -> None:
    args = parse_args(__doc__, argv)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    run(args, setup(args.device))
    leave()


if __name__ == "__main__":
    main()
