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

Each distinct step (model, layout, world) is traced once per process and kept: the
notebook's sections share their measurements. CommDebugMode runs only where the
collectives are asked for (`collectives=True`): it is a third mode on every operator.

The fake tensors are CPU tensors, so PyTorch runs its CPU kernels' autograd: where a
GPU kernel saves fewer tensors for backward (RMSNorm), Layout.norm says which to count.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import re
import warnings
from dataclasses import dataclass, replace

import gpt
import torch
import torch.distributed as dist

__all__ = ["LLAMA", "PUBLISHED_PARAMS", "Layout", "missing_features", "fake_world",
           "n_params", "mesh_for", "build", "measure", "by_batch", "playbook_gib",
           "table", "fits", "HEADROOM", "host_check", "Step", "step_time", "CITED",
           "PUBLISHED", "GIB", "PlanError", "ddp_buckets_gib"]

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

# Cited, never measured here, each with its source (CITED[gpu]["sources"] prints them).
# Peaks: dense bf16 tensor-core FLOP/s, gpt.DATASHEET (NVIDIA's datasheets).
# In a node: nccl-tests all_reduce_perf bus bandwidth at large sizes, the low end of
# the reference ranges for 8 x H100 SXM (460-480 GB/s) and 8 x A100 SXM (230-250 GB/s)
# in Alaya NeW, "NCCL-tests in practice" (2026-05-06,
# https://docs.alayanew.com/en/docs/tech-blog/2026-05-06-nccl-tests).
# Between nodes: one NIC per GPU, so a ring's bus bandwidth is at most 8 NICs' rate
# per node: torchtitan's H100 hosts have 400 Gb/s per GPU (benchmarks/llama3_h100_
# 202412_torchtitan.md, "Hardware"): 8 x 50 = 400 GB/s; a DGX A100 has eight 200 Gb/s
# HDR InfiniBand ports (NVIDIA DGX A100 datasheet): 8 x 25 = 200 GB/s. Upper bounds,
# below the NVLink figures, as they must be, used as the estimate itself: a real
# ring between nodes runs below them, so the estimate's inter-node time is a floor.
# MFU: model-FLOPs utilisation (6N plus attention over the step's time, as
# step_time counts), from runs other than the ones checked in notebook 17's section
# 5: H100 38 %, the lowest BF16 MFU of Llama 3 405B's pre-training (Llama Team,
# "The Llama 3 Herd of Models", 2024, arXiv:2407.21783, Table 4: its 16,384-GPU,
# 131k-token context-parallel row, the least like an 8k FSDP run; the other rows
# give 41-43 %). A100 39 %: Megatron-LM's 1T model on 3,072 A100s reached 163 of
# 312 TFLOP/s, 52 %, counting the recomputed forward (Narayanan et al., SC21,
# arXiv:2104.04473, Eq. 3: 96 B s l h^2, four passes of the model, not three), so
# hardware-FLOPs utilisation; in model FLOPs it is 52 % x 3/4 = 39 %.
_BW_SOURCES = ("in a node: nccl-tests all_reduce_perf, 8 x {gpu} SXM (Alaya NeW, "
               "'NCCL-tests in practice', 2026, https://docs.alayanew.com/en/docs/"
               "tech-blog/2026-05-06-nccl-tests); between nodes: 8 NICs of "
               "{nic} Gb/s per node ({nic_src}), an upper bound")
# Megatron's FLOPs count four passes of the model with full recomputation (forward,
# forward again, backward's two), model FLOPs three: hardware to model utilisation
HFU_TO_MFU = 3 / 4
CITED = {
    "H100": {"peak": gpt.datasheet_peak("H100 80GB HBM3", torch.bfloat16),
             "nvlink": 460e9, "between_nodes": 8 * 50e9, "mfu": 0.38, "gib": 80,
             "sources": (_BW_SOURCES.format(gpu="H100", nic=400, nic_src="torchtitan's "
                         "benchmark hosts") + "; MFU: Llama 3 405B's pre-training, "
                         "The Llama 3 Herd of Models (2024, arXiv:2407.21783), "
                         "Table 4, its lowest row (131k-token context parallel)")},
    "A100": {"peak": gpt.datasheet_peak("A100", torch.bfloat16),
             "nvlink": 230e9, "between_nodes": 8 * 25e9, "mfu": 0.52 * HFU_TO_MFU,
             "gib": 80,
             "sources": (_BW_SOURCES.format(gpu="A100", nic=200, nic_src="NVIDIA DGX "
                         "A100 datasheet") + "; MFU: Megatron-LM's 1T model on 3,072 "
                         "A100s, Narayanan et al. (SC21, arXiv:2104.04473): 52 % "
                         "of peak counting the recompute, x 3/4 in model FLOPs")}}

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
    "parallelize_module": ("torch.distributed.tensor.parallel", "parallelize_module"),
    "FSDPMemTracker's per-operator peak hook":
        ("torch.distributed._tools.fsdp2_mem_tracker",
         "FSDPMemTracker._update_peak_stats"),
    "selective activation checkpointing":
        ("torch.utils.checkpoint", "create_selective_checkpoint_contexts")}


class PlanError(ValueError):
    """A plan that cannot run: the message says what, with the numbers."""


def missing_features() -> list[str]:
    """Return one sentence per piece of PyTorch the plan needs and cannot find."""
    out = []
    for what, (module, name) in _FEATURES.items():
        try:
            found = importlib.import_module(module)
            for part in name.split("."):
                found = getattr(found, part)
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

    infos = getattr(_redistribute, "_gen_transform_infos", None)
    for clear in (getattr(debug, "_clear_sharding_prop_cache", None),
                  getattr(infos, "cache_clear", None)):
        if clear is not None:
            clear()


@dataclass(frozen=True)
class Layout:
    """How one step runs: strategy, world size, TP degree, batch, recomputation,
    precision, and which RMSNorm kernel's saved tensors are counted."""

    kind: str  # "ddp", "fsdp", "fsdp_keep" (reshard_after_forward=False), "fsdp_tp"
    world: int
    tp: int = 1
    batch: int = 1  # local batch: sequences per data-parallel rank
    recompute: str = "none"  # "none", "full" or "op" (torchtitan's selective policy)
    bf16: bool = True  # MixedPrecisionPolicy(bf16 params, fp32 reduce), fp32 master
    # "fused": what F.rms_norm saves on a CUDA GPU with this PyTorch (the input and
    # rstd); "composite": what it saves on a CPU, as torchtitan's own RMSNorm did.
    # With recomputation the composite is counted: at most one block's norms differ
    norm: str = "fused"

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


# quoted from torchtitan at 820504e20 (the runs in it used torchtitan 9dec370)
_TABLES = "benchmarks/llama3_h100_202412_torchtitan.md at torchtitan 820504e20"
_PERF = "docs/performance.md at torchtitan 3faaa1a0d"
# torchtitan's published tables, quoted: (model, GPU, layout as they ran it, memory
# GiB or None, tokens/s per GPU, source). Their 8B runs used the "op" policy and
# their own RMSNorm, which saves what the composite kernel saves.
PUBLISHED += [
    ("8B", "H100", Layout("fsdp", 8, batch=2, recompute="op", norm="composite"), 82.4,
     5762, f"{_TABLES}, Table 1 (FSDP, no compile; 96 GB H100 at 500 W)"),
    ("8B", "H100", Layout("fsdp", 128, batch=2, recompute="op", norm="composite"),
     67.0, 5605, f"{_TABLES}, Table 3 (FSDP, no compile)"),
    ("70B", "A100", Layout("fsdp", 64, batch=1, recompute="full", norm="composite"),
     None, 331, f"{_PERF}, Llama 3 table (64 A100 80GB)"),
    ("405B", "H100", Layout("fsdp_tp", 128, tp=8, batch=2, recompute="full",
                            norm="composite"),
     None, 109, f"{_PERF}, Llama 3.1 table (128 H100 95 GB, no Float8)")]
RECOMPUTE = ("none", "full", "op")
NORMS = ("fused", "composite")


def _check(cfg: gpt.Config, layout: Layout) -> None:
    """Raise PlanError with the numbers where the mesh cannot take the layout."""
    if layout.kind not in ("ddp", "fsdp", "fsdp_keep", "fsdp_tp"):
        raise PlanError(f"layout kind {layout.kind!r}: choose ddp, fsdp, fsdp_keep "
                        f"or fsdp_tp")
    if layout.recompute not in RECOMPUTE or layout.norm not in NORMS:
        raise PlanError(f"recompute {layout.recompute!r}, norm {layout.norm!r}: "
                        f"choose recompute in {RECOMPUTE} and norm in {NORMS}")
    if layout.kind != "fsdp_tp" and layout.tp != 1:
        raise PlanError(f"tp={layout.tp} on a {layout.kind} layout: only fsdp_tp "
                        f"splits weights over a TP group; use Layout('fsdp_tp', "
                        f"{layout.world}, tp={layout.tp}) or leave tp at 1")
    if layout.kind == "fsdp_tp" and layout.tp < 2:
        raise PlanError(f"fsdp_tp with tp={layout.tp}: a TP group needs at least 2 "
                        f"ranks; for no TP use Layout('fsdp', {layout.world})")
    if layout.world < 1 or layout.batch < 1:
        raise PlanError(f"world {layout.world}, batch {layout.batch}: a layout needs "
                        f"at least one rank and one sequence per rank")
    tp = layout.tp
    if layout.world % tp:
        raise PlanError(f"TP {tp} does not divide the world of {layout.world} GPUs: "
                        f"choose a TP degree among its divisors")
    if cfg.heads % tp or cfg.n_kv % tp:
        raise PlanError(f"TP {tp} does not divide {cfg.heads} query heads and "
                        f"{cfg.n_kv} K/V heads: each rank must hold whole heads, "
                        f"so choose TP among the common divisors, e.g. "
                        f"{math.gcd(cfg.heads, cfg.n_kv)}")


def _check_world(layout: Layout) -> None:
    """Raise PlanError unless a fake world of the layout's size is open."""
    if not dist.is_initialized():
        raise PlanError(f"no process group: measure {layout.strategy} inside "
                        f"`with plan.fake_world({layout.world}):`")
    have = dist.get_world_size()
    if have != layout.world:
        raise PlanError(f"{layout.strategy} spans {layout.world} ranks, the fake "
                        f"world {have}: open plan.fake_world({layout.world}) for it")


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


_COUNTED: dict[str, int] = {}  # repr(config) -> its parameter count


def n_params(cfg: gpt.Config) -> int:
    """Return the model's parameter count, built on the meta device (no memory)."""
    if repr(cfg) not in _COUNTED:
        with torch.device("meta"):
            _COUNTED[repr(cfg)] = gpt.count_params(gpt.GPT(cfg))
    return _COUNTED[repr(cfg)]


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


def _fused_norm(norm: torch.nn.Module) -> None:
    """Make `norm` save for backward what CUDA's fused RMSNorm saves: one tensor of
    its input's size and dtype, and one float32 rstd per row. On a GPU, F.rms_norm
    calls aten._fused_rms_norm, whose autograd node keeps input, weight and rstd
    (FusedRmsNormBackward0 in torch/include/torch/csrc/autograd/generated/
    Functions.h); on a CPU it runs composite ops, which also keep float32 copies.
    Those become placeholders that backward allocates again, as temporaries, as the
    fused kernel recomputes them: the shapes are right, the values are not (fake
    tensors have none). Used without recomputation only: checkpointing decides
    what a checkpointed norm saves."""
    forward = norm.forward

    def fused_forward(x):
        rows, kept = x.numel() // x.shape[-1], []

        def pack(t):
            if t.numel() <= max(rows, x.shape[-1]):
                return t  # rstd or the weight, as on the GPU
            if not kept and t.dtype == x.dtype and t.shape == x.shape:
                kept.append(True)
                return t  # one tensor of the input's size, as on the GPU
            return _Meta(t)

        def unpack(saved):
            return saved.new() if isinstance(saved, _Meta) else saved

        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            return forward(x)

    norm.forward = fused_forward


class _Meta:
    """A saved tensor's shape and kind, without its storage."""

    def __init__(self, t: torch.Tensor):
        self.like = t.new_empty((0,)) if t.dim() else t.new_empty(())
        self.shape, self.stride = t.shape, t.stride()

    def new(self) -> torch.Tensor:
        return self.like.new_empty(self.shape)


# torchtitan's op-level selective checkpointing (torchtitan/parallelisms/parallelize_
# llama.py at 9dec370): save these ops' outputs, except every second matmul; this
# CPU's flash attention stands in for CUDA's (they save the same tensors)
def _sac_save_list() -> set:
    ops = torch.ops.aten
    names = ("_scaled_dot_product_efficient_attention",
             "_scaled_dot_product_flash_attention",
             "_scaled_dot_product_flash_attention_for_cpu")
    save = {ops.mm.default, ops.abs.default, ops.max.default}
    save |= {getattr(ops, n).default for n in names if hasattr(ops, n)}
    functional = getattr(torch.ops, "_c10d_functional", None)
    if functional is not None and hasattr(functional, "reduce_scatter_tensor"):
        save.add(functional.reduce_scatter_tensor.default)
    return save


def _selective(block: torch.nn.Module) -> None:
    """Checkpoint `block` with torchtitan's "op" policy."""
    import functools
    from collections import defaultdict

    from torch.utils.checkpoint import (
        CheckpointPolicy,
        checkpoint,
        create_selective_checkpoint_contexts,
    )

    save = _sac_save_list()

    def context():
        meta = defaultdict(int)

        def policy(ctx, func, *args, **kwargs):
            key = "recompute" if ctx.is_recompute else "forward"
            if func == torch.ops.aten.mm.default:
                meta[key] += 1
            keep = func in save and not (func == torch.ops.aten.mm.default
                                         and meta[key] % 2 == 0)
            return (CheckpointPolicy.MUST_SAVE if keep
                    else CheckpointPolicy.PREFER_RECOMPUTE)

        return create_selective_checkpoint_contexts(policy)

    layer = block._layer
    block._layer = functools.partial(checkpoint, layer, use_reentrant=False,
                                     context_fn=context)


def build(cfg: gpt.Config, layout: Layout, meshes):
    """Return (model, optimizer) sharded as `layout` says over `meshes` (mesh_for's);
    call it inside fake_world and FakeTensorMode."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    full = layout.recompute == "full"
    model = gpt.GPT(cfg, recompute="full" if full else "none")
    if layout.recompute == "op":
        for block in model.blocks:
            _selective(block)
    if layout.norm == "fused" and layout.recompute == "none":
        for module in model.modules():
            if isinstance(module, torch.nn.RMSNorm):
                _fused_norm(module)
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
    """Forward and backward at the layout's local batch, the loss in float32, the bf16
    logits freed before backward (torchtitan's train.py: `del pred`). The optimizer's
    step adds nothing to measure: fused AdamW keeps no temporaries, and its moments
    exist already (build's warm-up step)."""
    x = torch.zeros(layout.batch, cfg.block, dtype=torch.long)
    logits = model(x)
    if hasattr(logits, "to_local"):  # a replicated DTensor from the TP head
        logits = logits.to_local()
    loss = gpt.loss_fn(logits.float(), x)  # torchtitan upcasts the logits too
    del logits  # only the float32 copy stays, in the loss's graph
    loss.backward()


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
    """One rank's step: peak bytes per category, collectives and their bus bytes, and
    the peak of each place in the step (`places`, what the depth extension reads).
    `counts` and `bus_bytes` are None where the collectives were not counted."""

    peak: dict[str, float]  # FSDPMemTracker's categories at the peak, and "Total"
    counts: dict[str, int] | None  # CommDebugMode's count of each collective
    bus_bytes: dict[str, float] | None  # "kind (tp|dp)": the bytes busbw divides
    places: dict = None  # (phase, where, block) -> categories and "Total"


def _group_size(args, sizes: dict[str, int]) -> int:
    """Return the size of the group a collective's arguments name. c10d's ops pass
    the group as a ScriptObject, unboxed here; functional ones pass its name."""
    from torch.distributed.distributed_c10d import _resolve_process_group

    for a in args:
        if isinstance(a, str):  # a functional collective names its group
            with contextlib.suppress(Exception):
                return _resolve_process_group(a).size()
        elif isinstance(a, torch.ScriptObject):
            unbox = getattr(dist.ProcessGroup, "unbox", None)
            if unbox is not None:
                with contextlib.suppress(Exception):
                    return unbox(a).size()
            return sizes["dp"]  # the only c10d user here is FSDP, on the dp mesh
    return sizes["dp"]


_SEEN: dict = {}  # (config, layout, world) -> Step: a kernel measures each once
_FAST_COUNT = True  # CommDebugMode sees only collectives and DTensor operators
_BLOCK = re.compile(r"\.blocks\.(\d+)$")


def _run(cfg: gpt.Config, layout: Layout, collectives: bool) -> Step:
    """Return one step of `cfg` as FSDPMemTracker (and CommDebugMode) saw it, traced
    once per case: a step traced with its collectives serves one asked without."""
    if layout.recompute != "none":  # the norm kernel matters only without it
        layout = replace(layout, norm="composite")
    key = (repr(cfg), layout, dist.get_world_size())
    seen = _SEEN.get(key)
    if seen is None or (collectives and seen.counts is None):
        _SEEN[key] = seen = _run_once(cfg, layout, collectives)
    return seen


def _tracker(model, opt):
    """Return an FSDPMemTracker that also keeps the peak of each place in the step:
    inside block j or after it, in forward or backward (ModTracker's `parents`)."""
    from torch._guards import active_fake_mode
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed.tensor import DTensor

    class Places(FSDPMemTracker):
        def __init__(self, mod, optm):
            super().__init__(mod, optm)
            self.places, self._after, self._inside = {}, {}, {}
            self._step_mode = None

        def __enter__(self):
            if self._depth == 0:
                self._step_mode = active_fake_mode()
            return super().__enter__()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if DTensor not in types and active_fake_mode() is not self._step_mode:
                # DTensor's propagation, under its own fake mode (_propagation_apart):
                # no rank's memory. Newer trackers skip these operators themselves;
                # older ones (torch 2.11) would count them
                return func(*args, **(kwargs or {}))
            return super().__torch_dispatch__(func, types, args, kwargs)

        def _update_peak_stats(self, peak_state):  # after every operator: keep it lean
            super()._update_peak_stats(peak_state)
            mods = self._mod_tracker
            phase = "bw" if mods.is_bw else "fw"
            parents = frozenset(mods.parents)
            inside = self._inside.get(parents)
            if inside is None:  # the block this set of modules lies in, or -1
                self._inside[parents] = inside = next(
                    (int(m.group(1)) for n in parents if (m := _BLOCK.search(n))), -1)
            if inside >= 0:
                self._after[phase] = inside
                where = (phase, "in", inside)
            else:
                where = (phase, "after", self._after.get(phase, -1))
            for snap in self._curr_mem_snap.values():
                best = self.places.get(where)
                if best is None or snap["Total"] > best["Total"]:
                    self.places[where] = dict(snap)  # keys renamed once, at the end

        def named_places(self) -> dict:
            return {where: {str(getattr(k, "value", k)): float(v)
                            for k, v in snap.items()}
                    for where, snap in self.places.items()}

    return Places(model, opt)


@contextlib.contextmanager
def _propagation_apart():
    """Run DTensor's sharding propagation under a fake mode of its own.

    DTensor works out each operator's output shape by running it on global-shape fake
    tensors, under the active fake mode if there is one (torch/distributed/tensor/
    _sharding_prop.py: `detect_fake_mode() or FakeTensorMode()`). Here the whole step
    runs under FakeTensorMode, so those global tensors would be tracked as memory,
    and only where DTensor's cache misses: a rank's bytes would depend on what ran
    before. The tracker skips operators under any other fake mode (`_tracker`), so
    this gives propagation one (what it gets on a GPU, where no fake mode is active)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed.tensor import _sharding_prop

    if not hasattr(_sharding_prop, "detect_fake_mode"):  # a PyTorch that moved it
        yield
        return
    own = FakeTensorMode()
    found = _sharding_prop.detect_fake_mode
    _sharding_prop.detect_fake_mode = lambda *args: own
    try:
        yield
    finally:
        _sharding_prop.detect_fake_mode = found


def _run_once(cfg: gpt.Config, layout: Layout, collectives: bool = True) -> Step:
    """Trace one step of `cfg`, every block built: the tracker always, CommDebugMode
    (with the bus bytes) only if `collectives`."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed.tensor.debug import CommDebugMode

    bus: dict[str, float] = {}
    meshes = mesh_for(cfg, layout)
    sizes = {"dp": meshes[0].size(), "tp": meshes[1].size() if meshes[1] else 1}

    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.debug import _comm_mode

    class Bytes(CommDebugMode):  # CommDebugMode counts; here we add the bytes
        def __init__(self):
            super().__init__()
            # the collectives CommDebugMode counts (empty if a PyTorch renames them:
            # then every operator takes CommDebugMode's own path, only slower)
            self.watched = set(getattr(self, "comm_registry", ())) | set(
                getattr(_comm_mode, "c10d_collective_ops", ()))

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            packet = getattr(func, "_overloadpacket", None)
            if (_FAST_COUNT and self.watched and packet is not None
                    and packet not in self.watched and DTensor not in types):
                # neither a collective nor a DTensor operator: CommDebugMode would
                # only log it per module, which nothing here reads
                return func(*args, **(kwargs or {}))
            out = super().__torch_dispatch__(func, types, args, kwargs)
            kind = _COLLECTIVES.get(str(func._overloadpacket).split(".")[-1])
            if kind is not None and out is not NotImplemented:
                # the unsharded side: an all-gather's output, which a functional
                # all-gather returns rather than takes
                flat = [t for a in (*args, out) for t in
                        (a if isinstance(a, (list, tuple)) else [a])]
                size = max(t.numel() * t.element_size() for t in flat
                           if isinstance(t, torch.Tensor))
                # DTensor (TP) calls the functional collectives, which name their
                # group; FSDP2 calls c10d's, which pass it
                by = "tp" if any(isinstance(a, str) for a in args) else "dp"
                key = f"{kind} ({by})"
                n = _group_size(args, sizes)
                bus[key] = bus.get(key, 0.0) + size * _RING[kind](n)
            return out

    with FakeTensorMode(), warnings.catch_warnings(), _propagation_apart():
        # FSDP2 warns that the root returns a view; nothing here writes to it in place
        warnings.filterwarnings("ignore", message="FSDP2-wrapped module")
        # older ModTrackers warn when no input needs a gradient (token ids never do)
        warnings.filterwarnings("ignore", message="Full backward hook is firing")
        model, opt = build(cfg, layout, meshes)
        tracker = _tracker(model, opt)
        counter = Bytes() if collectives else contextlib.nullcontext()
        with tracker, counter:
            _step(model, cfg, layout)
        (snap,) = tracker.get_tracker_snapshot("peak").values()
    peak = {str(getattr(k, "value", k)): float(v) for k, v in snap.items() if v}
    if not collectives:
        return Step(peak, None, None, tracker.named_places())
    counts = {str(k).split(".")[-1]: v for k, v in counter.get_comm_counts().items()}
    return Step(peak, counts, bus, tracker.named_places())


def _line(a: dict | None, b: dict | None, steps: float) -> dict | None:
    """Return a + (b - a) * steps, key by key (None where either is None)."""
    if a is None or b is None:
        return None
    return {k: a.get(k, 0.0) + (b.get(k, 0.0) - a.get(k, 0.0)) * steps
            for k in set(a) | set(b)}


def _deepen(two: Step, three: Step, layers: int) -> dict:
    """Return the peak of every place at `layers` blocks from steps at 2 and 3.

    At a given place, memory is a constant plus a sum over blocks: what blocks
    before it saved, what blocks after it left (gradients, shards). Block j of L
    holds a + b j + c (L-1-j): block 0 gives c, the last block gives b, and the
    middle block of 3 the rest; over the middle blocks the largest lies at j = 1 or
    L-2. Places before any block grow by a fixed amount per block too."""
    at2, at3 = two.places, three.places
    out = {}
    for phase, kind in {(p, k) for p, k, _ in at3}:
        ends = {"before": (-1, -1), "first": (0, 0), "last": (1, 2)}
        for name, (j2, j3) in ends.items():
            if (phase, kind, j2) in at2 and (phase, kind, j3) in at3:
                out[(phase, kind, name)] = _line(at2[(phase, kind, j2)],
                                                 at3[(phase, kind, j3)], layers - 2)
        if all((phase, kind, j) in at3 for j in (0, 1, 2)) and all(
                (phase, kind, j) in at2 for j in (0, 1)):
            mid = at3[(phase, kind, 1)]
            c = _line(at2[(phase, kind, 0)], at3[(phase, kind, 0)], 1.0)
            b = _line(at2[(phase, kind, 1)], at3[(phase, kind, 2)], 1.0)
            for name, end2, end3 in (("second", at2[(phase, kind, 0)], c),
                                     ("second to last", at2[(phase, kind, 1)], b)):
                slope = {k: end3.get(k, 0.0) - end2.get(k, 0.0)
                         for k in set(end2) | set(end3)}
                out[(phase, kind, name)] = {
                    k: mid.get(k, 0.0) + slope.get(k, 0.0) * (layers - 3)
                    for k in set(mid) | set(slope)}
    return out


def _peak_of(places: dict) -> dict:
    """Return the categories of the place with the largest total."""
    best = max(places.values(), key=lambda s: s["Total"])
    return {k: v for k, v in best.items() if v}


def measure(cfg: gpt.Config, layout: Layout, collectives: bool = True) -> Step:
    """Return one rank's step at cfg.layers blocks, measured at 2 and 3.

    The blocks are equal, so collectives and bus bytes grow by a fixed amount per
    block, and so does the memory at each place of the step (`_deepen`); the peak is
    the largest place at full depth, wherever in the step it falls. At 2 and 3 blocks
    the largest place must be the tracker's own peak: the places cover the step.
    `collectives=False` skips CommDebugMode: memory only, a third faster."""
    _check(cfg, layout)
    _check_world(layout)
    if cfg.layers <= 3:
        return _run(cfg, layout, collectives)
    two, three = (_run(replace(cfg, layers=n), layout, collectives) for n in (2, 3))
    for step in (two, three):
        top = max(s["Total"] for s in step.places.values())
        if abs(top - step.peak["Total"]) > 1e-6 * step.peak["Total"]:
            raise RuntimeError(f"the tracker's peak {step.peak['Total']:.0f} B lies "
                               f"outside every tracked place (largest {top:.0f} B)")
    places = _deepen(two, three, cfg.layers)
    return Step(_peak_of(places), _line(two.counts, three.counts, cfg.layers - 2),
                _line(two.bus_bytes, three.bus_bytes, cfg.layers - 2), places)


def by_batch(cfg: gpt.Config, layout: Layout, batch: int,
             collectives: bool = False) -> Step:
    """Return the step at local batch `batch` from measurements at 1 and 2: where
    the peak falls, bytes grow linearly with the sequences a rank holds. A place
    whose largest moment switches between two operators is not linear (block 0's
    forward, at 8B's widths: well below the peak); the tests check batch 4."""
    _check(cfg, replace(layout, batch=batch))
    one, two = (measure(cfg, replace(layout, batch=b), collectives) for b in (1, 2))
    places = {k: _line(one.places[k], two.places[k], batch - 1)
              for k in one.places.keys() & two.places.keys()}
    return Step(_peak_of(places), one.counts,
                _line(one.bus_bytes, two.bus_bytes, batch - 1), places)


def ddp_buckets_gib(cfg: gpt.Config, layout: Layout) -> float:
    """Return DDP's reducer buckets in GiB, which the FSDP2 stand-in does not hold:
    with gradient_as_bucket_view=False (the default) DDP copies every gradient into
    buckets allocated once, in the parameters' dtype (torch/nn/parallel/
    distributed.py: the view "saves" memory "equal to the total gradients size")."""
    return n_params(cfg) * 4 / GIB if layout.kind == "ddp" else 0.0


# The caching allocator reserves more than the tensors it holds (free blocks, and
# the CUDA context and NCCL's buffers lie outside it): torchtitan's reserved peak
# over our allocated one on the same 8B runs (notebook 17, section 5: 82.4 GiB over
# 68.3, 67.0 over 57.8), the larger ratio, rounded up. A cited margin, not a law.
HEADROOM = 1.21


def fits(cfg: gpt.Config, layout: Layout, gib: float) -> tuple[bool, str]:
    """Return whether the layout fits GPUs of `gib` GiB, with HEADROOM over the
    allocated peak, and one sentence why."""
    try:
        need = measure(cfg, layout, collectives=False).peak["Total"] / GIB
    except PlanError as err:
        return False, str(err)
    need = (need + ddp_buckets_gib(cfg, layout)) * HEADROOM
    if need <= gib:
        return True, (f"{layout}: fits, {need:.1f} of {gib:g} GiB per GPU "
                      f"(allocated peak x {HEADROOM}, the allocator's headroom)")
    return False, (f"{layout}: does not fit, needs {need:.1f} GiB per GPU "
                   f"(allocated peak x {HEADROOM}, the allocator's headroom), "
                   f"{gib:g} available: shard more, recompute, or lower the batch")


def playbook_gib(cfg: gpt.Config, layout: Layout) -> tuple[float, float]:
    """Return the Playbook's bytes per rank in GiB: (model states, activations)."""
    _check(cfg, layout)
    # states: 16 bytes a parameter in bf16 mixed precision (2 + 2 + 4 master + 8
    # Adam) and in fp32 (4 + 4 + 8), divided by the ranks that shard them
    shard = 1 if layout.kind == "ddp" else layout.world
    states = n_params(cfg) * 16 / shard
    # activations without recompute: 34 s b h bytes a layer, with flash attention
    # (no s^2 scores); full recompute keeps each block's input, 2 s b h
    per_layer = {"none": 34, "full": 2}.get(layout.recompute, float("nan"))
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
        formula = "    -" if math.isnan(acts) else f"{acts:5.1f}"  # none for "op"
        rows.append(f"{str(layout):36}{g['weights']:8.1f}{g['grads']:7.1f}"
                    f"{g['optimizer']:6.1f}{g['activations']:7.1f}"
                    f"{g['temporaries']:6.1f}{step.peak['Total'] / GIB:7.1f} | "
                    f"{states:8.1f} + {formula}")
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
    """Estimate one step from cited figures: compute at the cited MFU; TP's
    collectives exposed (they sit between a block's matmuls, waited for at once);
    FSDP's hidden behind compute up to its length. Seconds and tokens/s per GPU."""
    _check(cfg, layout)
    if gpu not in CITED:
        raise PlanError(f"GPU {gpu!r}: figures are cited for {', '.join(CITED)} only")
    cited = CITED[gpu]
    if step.bus_bytes is None:
        raise PlanError(f"{layout}: its collectives were not counted: measure it with "
                        f"collectives=True")
    # notebook 15's formula; the embedding is a lookup, not a matmul: torchtitan
    # leaves its parameters out of 6N as well
    fpt = gpt.flops_per_token(cfg, n_params(cfg) - cfg.vocab * cfg.dim)
    tokens = layout.batch * cfg.block / layout.tp  # per GPU per step
    compute = tokens * fpt / (cited["peak"] * cited["mfu"])
    dp_bw = cited["nvlink"] if layout.world <= per_node else cited["between_nodes"]
    # a TP group holds neighbouring ranks, inside one node; all-gathers and
    # reduce-scatters assumed at the cited all-reduce bus bandwidth
    tp = sum(b for k, b in step.bus_bytes.items() if "(tp)" in k) / cited["nvlink"]
    dp = sum(b for k, b in step.bus_bytes.items() if "(dp)" in k) / dp_bw
    step_s = compute + tp + max(0.0, dp - compute)
    return {"compute_s": compute, "tp_s": tp, "dp_s": dp, "step_s": step_s,
            "tokens_per_gpu": tokens / step_s, "flops_per_token": fpt}
