"""Tests of notebooks/scripts/gpt.py (the transformer of notebooks 15 and 16),
gpt_ddp.py and gpt_ddp_timing.py: determinism, an init independent of the layout,
the FLOPs formula, the datasheet lookup, the alternating timed rounds."""

from __future__ import annotations

import importlib
import sys

import pytest
import torch
from conftest import NOTEBOOK_DIR
from torch.utils.flop_counter import FlopCounterMode

SCRIPTS = NOTEBOOK_DIR / "scripts"


@pytest.fixture(scope="module")
def gpt():
    if str(SCRIPTS) not in sys.path:  # gpt_ddp imports gpt, as running it does
        sys.path.insert(0, str(SCRIPTS))
    return importlib.import_module("gpt")


def diff(a: torch.nn.Module, b: torch.nn.Module) -> float:
    """Return the largest difference of two models' whole weights (common.py's)."""
    common = importlib.import_module("common")
    return common.max_diff(common.full_state(a), common.full_state(b))


def test_shapes_and_tied_weights(gpt):
    cfg = gpt.Config()
    model = gpt.GPT(cfg)
    x = torch.zeros(2, cfg.block, dtype=torch.long)
    assert model(x).shape == (2, cfg.block, cfg.vocab)
    assert model.head.weight is model.tok.weight
    n = gpt.count_params(model)
    expected = cfg.vocab * cfg.dim + cfg.layers * (4 + 2 * cfg.mlp) * cfg.dim ** 2
    norms = (2 * cfg.layers + 1) * cfg.dim
    assert n == expected + norms, f"{n} parameters, expected {expected + norms}"


def test_init_is_deterministic_and_independent_of_layout(gpt):
    cfg = gpt.Config(layers=1)
    a, b = gpt.GPT(cfg), gpt.GPT(cfg).double()
    gpt.init_weights(a, seed=3)
    gpt.init_weights(b, seed=3)
    with torch.device("meta"):  # built without memory, as FSDP2 builds it
        c = gpt.GPT(cfg)
    c.to_empty(device="cpu")
    assert c.head.weight is not c.tok.weight, "to_empty unties: re-tie after it"
    swap = torch.__future__.get_swap_module_params_on_conversion()
    torch.__future__.set_swap_module_params_on_conversion(True)
    try:  # what DTensor parameters get: swapped in place, so the tie survives
        with torch.device("meta"):
            d = gpt.GPT(cfg)
        d.to_empty(device="cpu")
    finally:
        torch.__future__.set_swap_module_params_on_conversion(swap)
    assert d.head.weight is d.tok.weight, "swap_tensors keeps one Parameter object"
    c.tie_weights()
    gpt.init_weights(c, seed=3)
    wrapped = torch.nn.Sequential()
    wrapped.add_module("module", gpt.GPT(cfg))  # DDP's prefix must not change a seed
    gpt.init_weights(wrapped, seed=3)
    assert diff(a, c) == 0.0
    assert diff(a, wrapped.module) == 0.0
    assert diff(a, b) < 1e-8, "float32 is the float64 draw, rounded"
    gpt.init_weights(c, seed=4)
    assert diff(a, c) > 0.01, "another seed must give other weights"
    assert torch.equal(a.blocks[0].norm1.weight, torch.ones(cfg.dim))


def test_init_shards_a_dtensor(gpt, group):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    cfg = gpt.Config(layers=1)
    plain, sharded = gpt.GPT(cfg), gpt.GPT(cfg)
    mesh = init_device_mesh("cpu", (1,))
    fc = sharded.blocks[0].mlp.fc
    fc.weight = torch.nn.Parameter(distribute_tensor(fc.weight.data, mesh, [Shard(0)]))
    gpt.init_weights(plain)
    gpt.init_weights(sharded)
    assert hasattr(sharded.blocks[0].mlp.fc.weight, "device_mesh")
    assert diff(plain, sharded) == 0.0


def test_batch_is_the_same_global_batch_every_time(gpt):
    data = gpt.corpus(10_000)
    assert data.dtype == torch.uint8 and data.shape == (10_000,)
    x, y = gpt.batch(data, 5, 4, 16)
    x2, _ = gpt.batch(data, 5, 4, 16)
    x3, _ = gpt.batch(data, 6, 4, 16)
    assert x.shape == y.shape == (4, 16) and x.dtype == torch.long
    assert torch.equal(x, x2) and not torch.equal(x, x3)
    assert torch.equal(x[:, 1:], y[:, :-1]), "y is x shifted by one token"
    assert "Python" in gpt.corpus_pin()


def test_flops_per_token_matches_the_counter(gpt):
    """6N + attention, less the norms' weights (no matmul), is exactly the count."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    cfg = gpt.Config(layers=1, block=16)
    model = gpt.GPT(cfg)
    x, y = gpt.batch(gpt.corpus(10_000), 0, 2, cfg.block)
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        gpt.loss_fn(model(x), y).backward()
    norms = sum(p.numel() for n, p in model.named_parameters() if "norm" in n)
    per_token = gpt.flops_per_token(cfg, gpt.count_params(model)) - 6 * norms
    assert counter.get_total_flops() == x.numel() * per_token


def test_recompute_gives_the_same_gradients(gpt):
    cfg = gpt.Config(layers=1, block=16)
    x, y = gpt.batch(gpt.corpus(10_000), 0, 2, cfg.block)
    grads = []
    for mode in ("none", "full", "attention"):
        model = gpt.GPT(cfg, recompute=mode).double()
        gpt.init_weights(model)
        gpt.loss_fn(model(x), y).backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    assert torch.equal(grads[0], grads[1]) and torch.equal(grads[0], grads[2])
    with pytest.raises(ValueError, match="selective"):
        gpt.GPT(cfg, recompute="selective")  # not a silent "none"


@pytest.mark.parametrize("name, dtype, tflops", [
    ("NVIDIA H200", torch.bfloat16, 989), ("NVIDIA H200 NVL", torch.bfloat16, 835),
    ("NVIDIA H100 NVL", torch.bfloat16, 835), ("NVIDIA H100 PCIe", torch.bfloat16, 756),
    ("NVIDIA H100 80GB HBM3", torch.bfloat16, 989), ("Tesla T4", torch.float16, 65),
    ("NVIDIA A100-SXM4-80GB", torch.bfloat16, 312), ("Tesla T4", torch.bfloat16, None),
    ("NVIDIA H100", torch.bfloat16, None), ("NVIDIA H100 PCIe", torch.float32, None),
    ("NVIDIA GeForce RTX 4090", torch.float16, None)])
def test_datasheet_peak_by_whole_words_and_dtype(gpt, name, dtype, tflops):
    got = gpt.datasheet_peak(name, dtype)
    assert got == (None if tflops is None else tflops * 1e12), f"{name}, {dtype}: {got}"


def test_datasheet_h200_is_not_gh200(gpt, monkeypatch):
    table = {k: v for k, v in gpt.DATASHEET.items() if k != "GH200"}
    monkeypatch.setattr(gpt, "DATASHEET", table)
    assert gpt.datasheet_peak("NVIDIA GH200 480GB", torch.bfloat16) is None
    assert gpt.datasheet_peak("NVIDIA H200", torch.bfloat16) == 989e12


def test_ddp_step_all_reduces_only_the_last_micro_batch(gpt, group):
    """One rank can count: no_sync skips the hook, the last micro-batch runs it."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    ddp_script = importlib.import_module("gpt_ddp")
    cfg = gpt.Config(layers=1, block=16)
    model = gpt.GPT(cfg).double()
    gpt.init_weights(model)
    ddp, counter = DDP(model), {"calls": 0, "elements": 0}
    ddp.register_comm_hook(counter, ddp_script.counting_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = gpt.batch(gpt.corpus(10_000), 0, 6, cfg.block)
    assert ddp_script.ddp_step(ddp, opt, x, y, 3, counter) == [0, 0, 1]
    assert counter["elements"] == gpt.count_params(model), "each gradient once"


def test_timed_rounds_alternate_and_take_the_slowest_rank(gpt, group):
    """Each round times DDP and one process; DDP's time is the slowest rank's."""
    import argparse

    timing = importlib.import_module("gpt_ddp_timing")
    args = argparse.Namespace(batch_size=4, accum=2, rounds=3, round_steps=1)
    out = timing.timed(gpt.Config(layers=1, block=16), args, torch.device("cpu"),
                           gpt.corpus(10_000))
    assert len(out["ddp_step_s"]) == len(out["single_step_s"]) == 3, out
    assert len(out["rank_step_s"]) == 1 and len(out["rank_step_s"][0]) == 3, out
    assert out["ddp_step_s"] == [max(r) for r in zip(*out["rank_step_s"], strict=True)]
    assert min(out["ddp_step_s"] + out["single_step_s"]) > 0, out
