"""Plan a run you cannot afford: Llama-3 shapes measured per rank on a 2-core CPU.

Notebook 17's planning code, in the transformer family (it needs gpt.py only). The
model is gpt.GPT with Llama-3 shapes, built under FakeTensorMode (shapes, no memory),
sharded by PyTorch's own fully_shard and parallelize_module over a fake process group
(one process sees rank 0 of a world of any size), and stepped once under
FSDPMemTracker (peak bytes per category) and CommDebugMode (collectives, with their
bytes added here). Everything measured is one rank's view; every time is an estimate
from cited figures, and says so.

    with fake_world(8):
        peak = measure(LLAMA["8B"], Layout("fsdp", 8, batch=2))
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import warnings
from dataclasses import dataclass, replace

import gpt
import torch
import torch.distributed as dist

__all__ = ["LLAMA", "PUBLISHED_PARAMS", "Layout", "missing_features", "fake_world",
           "n_params", "mesh_for", "build", "measure", "by_batch", "playbook_gib",
           "table",
           "fits", "host_check", "Step", "step_time", "CITED", "PUBLISHED", "GIB",
           "PlanError"]

GIB = 2**30
# Meta's model cards (llama-models, MODEL_CARD.md): shapes from each params.json
LLAMA = {
    "8B": gpt.Config(vocab=128_256, block=8192, layers=32, heads=32, dim=4096,
                     kv_heads=8, hidden=14_336, swiglu=True, tied=False),
    "70B": gpt.Config(vocab=128_256, block=8192, layers=80, heads=64, dim=8192,
                      kv_heads=8, hidden=28_672, swiglu=True, tied=False),
    "405B": gpt.Config(vocab=128_256, block=8192, layers=126, heads=128, dim=16_384,
                       kv_heads=8, hidden=53_248, swiglu=True, tied=False)}
PUBLISHED_PARAMS = {"8B": 8.03e9, "70B": 70.6e9, "405B": 405.9e9}  # cited, as above

# Cited, never measured here. Dense bf16 tensor-core peaks: gpt.DATASHEET (NVIDIA's
# datasheets). Bus bandwidths: nccl-tests all_reduce_perf at large sizes, the low end
# of published reference ranges: 8 x H100 SXM over NVLink 460-480 GB/s and 8 x A100
# SXM 230-250 GB/s (docs.alayanew.com, "NCCL-tests in practice", 2026); between
# nodes, H100 with InfiniBand NDR 400-450 GB/s and A100 with HDR 250-300 GB/s
# (saturncloud.io, "Validating multi-node GPU clusters with NCCL tests").
# MFU: torchtitan's published runs (docs/performance.md; benchmarks/
# llama3_h100_202412_torchtitan.md): 8B on 8 H100 33-39 %, 8B on 64 A100 56.8 %.
CITED = {
    "H100": {"peak": gpt.datasheet_peak("H100 80GB HBM3", torch.bfloat16),
             "nvlink": 460e9, "between_nodes": 400e9, "mfu": 0.35, "gib": 80},
    "A100": {"peak": gpt.datasheet_peak("A100", torch.bfloat16),
             "nvlink": 230e9, "between_nodes": 250e9, "mfu": 0.55, "gib": 80}}

# torchtitan's published tables, quoted: (model, GPU, layout with its local batch of
# 8,192-token sequences, their recomputation, memory GiB or None, tokens/s per GPU,
# source). "selective" recomputation lies between our "none" and "full".
PUBLISHED = []  # filled below, once Layout exists

_FEATURES = {  # what the plan needs, where PyTorch keeps it (private or testing APIs)
    "the fake process group":
        ("torch.testing._internal.distributed.fake_pg", "FakeStore"),
    "FakeTensorMode": ("torch._subclasses.fake_tensor", "FakeTensorMode"),
    "FSDPMemTracker": ("torch.distributed._tools.fsdp2_mem_tracker", "FSDPMemTracker"),
    "CommDebugMode": ("torch.distributed.tensor.debug", "CommDebugMode"),
    "fully_shard": ("torch.distributed.fsdp", "fully_shard"),
    "parallelize_module": ("torch.distributed.tensor.parallel", "parallelize_module")}


class PlanError(ValueError):
    """A plan that cannot run: the message says what, with the numbers."""


def missing_features() -> list[str]:
    """Return one sentence per piece of PyTorch the plan needs and cannot find."""
    out = []
    for what, (module, name) in _FEATURES.items():
        try:
            getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            out.append(f"{what} is not at {module}.{name} in this PyTorch: search its "
                       f"source for '{name}' and change _FEATURES in gpt_plan.py.")
    if not dist.is_available():
        out.append("torch.distributed is not built into this PyTorch: install a "
                   "build from pytorch.org.")
    return out


@contextlib.contextmanager
def fake_world(world: int):
    """Join a fake process group of `world` ranks as rank 0; destroy it on exit."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if dist.is_initialized():  # a group left by an interrupted cell: drop it first
        dist.destroy_process_group()
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    try:
        yield
    finally:
        dist.destroy_process_group()
        _forget_meshes()


def _forget_meshes() -> None:
    """Clear DTensor's caches of sharding decisions: their meshes name the process
    groups just destroyed, and a mesh of the same shape in the next world would
    match them."""
    from torch.distributed.tensor import _redistribute, debug

    for clear in (getattr(debug, "_clear_sharding_prop_cache", None),
                  getattr(_redistribute._gen_transform_infos, "cache_clear", None)):
        if clear is not None:
            clear()


@dataclass(frozen=True)
class Layout:
    """How one step runs: strategy, world size, TP degree, batch and precision."""

    kind: str  # "ddp", "fsdp", "fsdp_keep" (reshard_after_forward=False), "fsdp_tp"
    world: int
    tp: int = 1
    batch: int = 1  # local batch: sequences per data-parallel rank
    recompute: str = "none"  # gpt.RECOMPUTE: "none", "attention" or "full"
    bf16: bool = True  # MixedPrecisionPolicy(bf16 params, fp32 reduce), fp32 master

    @property
    def strategy(self) -> str:
        """Return the strategy and its degrees, e.g. "FSDP 16 x TP 8"."""
        dp = self.world // self.tp
        return {"ddp": f"DDP {self.world}", "fsdp": f"FSDP {self.world}",
                "fsdp_keep": f"FSDP {self.world} (kept)",
                "fsdp_tp": f"FSDP {dp} x TP {self.tp}"}[self.kind]

    def __str__(self) -> str:
        return f"{self.strategy}, b={self.batch}, AC {self.recompute}, " + (
            "bf16" if self.bf16 else "fp32")


_TABLES = "benchmarks/llama3_h100_202412_torchtitan.md"
PUBLISHED += [
    ("8B", "H100", Layout("fsdp", 8, batch=2, recompute="full"), "selective", 82.4,
     5762, f"{_TABLES}, Table 1 (FSDP, no compile)"),
    ("8B", "H100", Layout("fsdp", 128, batch=2, recompute="full"), "selective", 67.0,
     5605, f"{_TABLES}, Table 3 (FSDP, no compile)"),
    ("70B", "A100", Layout("fsdp", 64, batch=1, recompute="full"), "full", None, 331,
     "docs/performance.md, Llama 3 table (64 A100 80GB)"),
    ("405B", "H100", Layout("fsdp_tp", 128, tp=8, batch=2, recompute="full"), "full",
     None, 109, "docs/performance.md, Llama 3.1 table (128 H100, no Float8)")]


def _check(cfg: gpt.Config, layout: Layout) -> None:
    """Raise PlanError with the numbers where the mesh cannot take the layout."""
    if layout.kind not in ("ddp", "fsdp", "fsdp_keep", "fsdp_tp"):
        raise PlanError(f"layout kind {layout.kind!r}: choose ddp, fsdp, fsdp_keep "
                        f"or fsdp_tp")
    tp = layout.tp if layout.kind == "fsdp_tp" else 1
    if layout.world % tp:
        raise PlanError(f"TP {tp} does not divide the world of {layout.world} GPUs: "
                        f"choose a TP degree among its divisors")
    if cfg.heads % tp or cfg.n_kv % tp:
        raise PlanError(f"TP {tp} does not divide {cfg.heads} query heads and "
                        f"{cfg.n_kv} K/V heads: each rank must hold whole heads, "
                        f"so choose TP among the common divisors, e.g. "
                        f"{math.gcd(cfg.heads, cfg.n_kv)}")


def _tensor_parallel(model: gpt.GPT, tp) -> None:
    """Megatron's split of every block over `tp`, sequence-parallel norms."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    def gather():
        return PrepareModuleInput(input_layouts=(Shard(1),),
                                  desired_input_layouts=(Replicate(),))

    parallelize_module(model, tp, {
        "tok": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "head": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate())})
    for block in model.blocks:
        plan = {"norm1": SequenceParallel(), "attn": gather(),
                "attn.q": ColwiseParallel(), "attn.k": ColwiseParallel(),
                "attn.v": ColwiseParallel(),
                "attn.proj": RowwiseParallel(output_layouts=Shard(1)),
                "norm2": SequenceParallel(), "mlp": gather(),
                "mlp.fc": ColwiseParallel(),
                "mlp.proj": RowwiseParallel(output_layouts=Shard(1))}
        if hasattr(block.mlp, "up"):
            plan["mlp.up"] = ColwiseParallel()
        parallelize_module(block, tp, plan)


def n_params(cfg: gpt.Config) -> int:
    """Return the model's parameter count, built on the meta device (no memory)."""
    with torch.device("meta"):
        return gpt.count_params(gpt.GPT(cfg))


def mesh_for(cfg: gpt.Config, layout: Layout):
    """Return the data-parallel and tensor-parallel (or None) meshes of `layout` on
    the fake world; call it outside FakeTensorMode.
    DDP is FSDP2's hybrid mode with shards of one rank: every rank holds everything."""
    from torch.distributed.device_mesh import init_device_mesh

    _check(cfg, layout)
    if layout.kind == "fsdp_tp":
        mesh = init_device_mesh("cpu", (layout.world // layout.tp, layout.tp),
                                mesh_dim_names=("dp", "tp"))
        return mesh["dp"], mesh["tp"]
    if layout.kind == "ddp":  # replicate over all ranks, shard over one
        return init_device_mesh("cpu", (layout.world, 1),
                                mesh_dim_names=("replicate", "shard")), None
    return init_device_mesh("cpu", (layout.world,), mesh_dim_names=("dp",)), None


def build(cfg: gpt.Config, layout: Layout, meshes):
    """Return (model, optimizer) sharded as `layout` says over `meshes` (mesh_for's);
    call it inside fake_world and FakeTensorMode."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    model = gpt.GPT(cfg, recompute=layout.recompute)
    mesh, tp = meshes
    mp = (MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
          if layout.bf16 else MixedPrecisionPolicy())
    keep = layout.kind == "fsdp_keep"
    # workaround: the meshes' own index tensors stay real; the fake parameters carry
    # their FakeTensorMode with them
    with torch._subclasses.fake_tensor.unset_fake_temporarily():
        if tp is not None:
            _tensor_parallel(model, tp)
        for block in model.blocks:  # one unit per block, then the root (torchtitan)
            fully_shard(block, mesh=mesh, mp_policy=mp, reshard_after_forward=not keep)
        fully_shard(model, mesh=mesh, mp_policy=mp, reshard_after_forward=False)
    # fused AdamW keeps no temporaries beside its two float32 moments
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    for p in model.parameters():  # create the moments now, so the tracker sees them
        p.grad = torch.zeros_like(p)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return model, opt


def _step(model, cfg: gpt.Config, layout: Layout) -> None:
    """Forward and backward at the layout's local batch, the loss in float32. The
    optimizer's step adds nothing to measure: fused AdamW keeps no temporaries, and
    its moments exist already (build's warm-up step)."""
    x = torch.zeros(layout.batch, cfg.block, dtype=torch.long)
    logits = model(x)
    if hasattr(logits, "to_local"):  # a replicated DTensor from the TP head
        logits = logits.to_local()
    gpt.loss_fn(logits.float(), x).backward()  # torchtitan upcasts the logits too


_RING = {"all_gather": lambda n: (n - 1) / n, "reduce_scatter": lambda n: (n - 1) / n,
         "all_reduce": lambda n: 2 * (n - 1) / n}
_COLLECTIVES = {  # c10d's ops and the functional ones, by the kind of ring they run
    "_allgather_base_": "all_gather", "allgather_": "all_gather",
    "allgather_into_tensor_coalesced_": "all_gather",
    "all_gather_into_tensor": "all_gather",
    "_reduce_scatter_base_": "reduce_scatter", "reduce_scatter_": "reduce_scatter",
    "reduce_scatter_tensor_coalesced_": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter",
    "allreduce_": "all_reduce", "allreduce_coalesced_": "all_reduce",
    "all_reduce": "all_reduce"}


@dataclass
class Step:
    """One rank's step: peak bytes per category, collectives and their bus bytes."""

    peak: dict[str, float]  # FSDPMemTracker's categories at the peak, and "Total"
    counts: dict[str, int]  # CommDebugMode's count of each collective
    bus_bytes: dict[str, float]  # "kind (tp|dp)": the bytes nccl-tests' busbw divides


def _group(args):
    """Return the process group a collective's arguments name."""
    from torch.distributed.distributed_c10d import _resolve_process_group

    for a in args:
        if isinstance(a, str):  # a functional collective names its group
            with contextlib.suppress(Exception):
                return _resolve_process_group(a)
        elif not isinstance(a, torch.Tensor) and callable(getattr(a, "size", None)):
            return a  # a c10d op passes the group itself
    return dist.group.WORLD


_SEEN: dict = {}  # (config, layout, world) -> Step: a kernel measures each once


def _run(cfg: gpt.Config, layout: Layout) -> Step:
    """Return one step of `cfg` as FSDPMemTracker and CommDebugMode saw it."""
    key = (repr(cfg), layout, dist.get_world_size())
    if key not in _SEEN:
        _SEEN[key] = _run_once(cfg, layout)
    return _SEEN[key]


def _run_once(cfg: gpt.Config, layout: Layout) -> Step:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed.tensor.debug import CommDebugMode

    bus: dict[str, float] = {}
    meshes = mesh_for(cfg, layout)

    class Bytes(CommDebugMode):  # CommDebugMode counts; here we add the bytes
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = super().__torch_dispatch__(func, types, args, kwargs)
            kind = _COLLECTIVES.get(str(func._overloadpacket).split(".")[-1])
            if kind is not None and out is not NotImplemented:
                flat = [t for a in args for t in (a if isinstance(a, list) else [a])]
                size = max(t.numel() * t.element_size() for t in flat
                           if isinstance(t, torch.Tensor))  # the unsharded side
                # DTensor (TP) calls the functional collectives, which name their
                # group; FSDP2 calls c10d's, which pass it
                by = "tp" if any(isinstance(a, str) for a in args) else "dp"
                key = f"{kind} ({by})"
                bus[key] = bus.get(key, 0.0) + size * _RING[kind](_group(args).size())
            return out

    with FakeTensorMode(), warnings.catch_warnings():
        # FSDP2 warns that the root returns a view; nothing here writes to it in place
        warnings.filterwarnings("ignore", message="FSDP2-wrapped module")
        # older ModTrackers warn when no input needs a gradient (token ids never do)
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        model, opt = build(cfg, layout, meshes)
        tracker, counter = FSDPMemTracker(model, opt), Bytes()
        with tracker, counter:
            _step(model, cfg, layout)
        (snap,) = tracker.get_tracker_snapshot("peak").values()
    peak = {str(getattr(k, "value", k)): float(v) for k, v in snap.items() if v}
    counts = {str(k).split(".")[-1]: v for k, v in counter.get_comm_counts().items()}
    return Step(peak, counts, bus)


def _extend(one: dict, two: dict, n: int, base: int = 1) -> dict:
    """Return values at `n` from values at `base` and `base + 1`, linearly."""
    return {k: one.get(k, 0) + (two.get(k, 0) - one.get(k, 0)) * (n - base)
            for k in sorted(set(one) | set(two))}


def measure(cfg: gpt.Config, layout: Layout) -> Step:
    """Return one rank's step, measured at 1 and 2 blocks and extended to cfg.layers:
    every block adds the same bytes and collectives (the blocks are equal). Where the
    peak falls at another moment with 2 blocks (other categories at the peak), the
    extension starts from 2 and 3 blocks instead."""
    base, one, two = 1, _run(replace(cfg, layers=1), layout), None
    two = _run(replace(cfg, layers=2), layout)
    if set(one.peak) != set(two.peak) and cfg.layers > 2:
        base, one, two = 2, two, _run(replace(cfg, layers=3), layout)
    peak = _extend(one.peak, two.peak, cfg.layers, base)
    peak["Total"] = sum(v for k, v in peak.items() if k != "Total")
    return Step(peak, _extend(one.counts, two.counts, cfg.layers, base),
                _extend(one.bus_bytes, two.bus_bytes, cfg.layers, base))


def by_batch(cfg: gpt.Config, layout: Layout, batch: int) -> Step:
    """Return the step at local batch `batch` from measurements at 1 and 2: bytes
    and collectives grow linearly with the sequences a rank holds."""
    one, two = (measure(cfg, replace(layout, batch=b)) for b in (1, 2))
    return Step(_extend(one.peak, two.peak, batch), one.counts,
                _extend(one.bus_bytes, two.bus_bytes, batch))


def fits(cfg: gpt.Config, layout: Layout, gib: float) -> tuple[bool, str]:
    """Return whether the layout fits GPUs of `gib` GiB, and one sentence why."""
    try:
        need = by_batch(cfg, layout, layout.batch).peak["Total"] / GIB
    except PlanError as err:
        return False, str(err)
    if need <= gib:
        return True, f"{layout}: fits, {need:.1f} of {gib:g} GiB per GPU"
    return False, (f"{layout}: does not fit, needs {need:.1f} GiB per GPU, "
                   f"{gib:g} available: shard more, recompute, or lower the batch")


def playbook_gib(cfg: gpt.Config, layout: Layout) -> tuple[float, float]:
    """Return the Playbook's bytes per rank in GiB: (model states, activations)."""
    # states: 16 bytes a parameter in bf16 mixed precision (2 + 2 + 4 master + 8
    # Adam) and in fp32 (4 + 4 + 8), divided by the ranks that shard them
    shard = 1 if layout.kind == "ddp" else layout.world
    states = n_params(cfg) * 16 / shard
    # activations without recompute: 34 s b h bytes a layer, with flash attention
    # (no s^2 scores); full recompute keeps each block's input, 2 s b h
    per_layer = 34 if layout.recompute == "none" else 2
    acts = per_layer * cfg.block * layout.batch * cfg.dim * cfg.layers / layout.tp
    return states / GIB, acts / GIB


_GROUPS = {"weights": ("Sharded Param", "Unsharded Param", "Buffer"),
           "grads": ("Sharded Grad", "Unsharded Grad", "Reduce Scatter"),
           "optimizer": ("OptState",), "activations": ("Activation", "Inputs",
                                                       "All Gather"),
           "temporaries": ("Temp",)}


def table(cfg: gpt.Config, steps: dict) -> str:
    """Return the measured GiB per rank by category, beside the Playbook's."""
    head = (f"{'layout':36}{'weights':>8}{'grads':>7}{'Adam':>6}{'acts':>7}"
            f"{'temp':>6}{'peak':>7} | Playbook: states + acts")
    rows = [head]
    for layout, step in steps.items():
        g = {k: sum(step.peak.get(c, 0) for c in cs) / GIB for k, cs in _GROUPS.items()}
        states, acts = playbook_gib(cfg, layout)
        rows.append(f"{str(layout):36}{g['weights']:8.1f}{g['grads']:7.1f}"
                    f"{g['optimizer']:6.1f}{g['activations']:7.1f}"
                    f"{g['temporaries']:6.1f}{step.peak['Total'] / GIB:7.1f} | "
                    f"{states:8.1f} + {acts:5.1f}")
    return "\n".join(rows)


def host_check(cfg: gpt.Config) -> str:
    """Return one sentence: could this host build `cfg` for real, in float32?"""
    need = n_params(cfg) * 4
    try:
        have = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):  # no sysconf (Windows, some macOS)
        return (f"building it for real needs {need / GIB:.0f} GiB of host memory "
                f"in float32: build it under FakeTensorMode instead")
    verdict = "fits in" if need <= have else "is too large for"
    return (f"{cfg.layers} blocks of width {cfg.dim} in float32 ({need / GIB:.0f} "
            f"GiB) {verdict} this host's {have / GIB:.0f} GiB free: "
            + ("" if need <= have else "build it under FakeTensorMode, as here"))


def step_time(cfg: gpt.Config, layout: Layout, gpu: str, step: Step,
              per_node: int = 8) -> dict[str, float]:
    """Estimate one step from cited figures: compute at the cited MFU, plus the
    communication that compute cannot hide. Returns seconds and tokens/s per GPU."""
    cited = CITED[gpu]
    # notebook 15's formula; the embedding is a lookup, not a matmul: torchtitan
    # leaves its parameters out of 6N as well
    fpt = gpt.flops_per_token(cfg, n_params(cfg) - cfg.vocab * cfg.dim)
    tokens = layout.batch * cfg.block / layout.tp  # per GPU per step
    compute = tokens * fpt / (cited["peak"] * cited["mfu"])
    dp_bw = cited["nvlink"] if layout.world <= per_node else cited["between_nodes"]
    # a TP group holds neighbouring ranks, inside one node; all-gathers and
    # reduce-scatters assumed at the cited all-reduce bus bandwidth
    wire = sum(b / (cited["nvlink"] if "(tp)" in k else dp_bw)
               for k, b in step.bus_bytes.items())
    exposed = max(0.0, wire - compute)  # overlapped with compute up to its length
    return {"compute_s": compute, "comm_s": wire, "step_s": compute + exposed,
            "tokens_per_gpu": tokens / (compute + exposed), "flops_per_token": fpt}
