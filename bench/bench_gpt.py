"""MFU of notebook 15's transformer on one CPU process with 1 thread.

MFU = tokens/s x FLOPs per token (gpt.flops_per_token: 6N + 12 L T D) / peak, where
the peak is measured as notebook 15 measures it: the best float32 matmul rate of the
same thread over a few square sizes (256, 512, 1024: a busy machine slows the large
ones most), the best of all rounds. PAIRS rounds alternate those ceilings and a
training step's median of 3 (bench.pairs.interleave); each round's MFU divides its
step by that one peak, and the key is the median over rounds with the lowest and
highest round. The model's own widest matmul must not beat the peak, else the
ceiling was measured under load and the run fails.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from bench.pairs import describe, interleave, ratio_entry, ratio_keys
from helpers import benchmark

SCRIPTS = Path(__file__).resolve().parents[1] / "notebooks" / "scripts"
BATCH, SIZES = 16, (256, 512, 1024)
KEYS = ratio_keys("gpt_cpu_mfu_1proc")


def matmul_rate(m: int, k: int, n: int) -> float:
    """Return the best float32 FLOP/s of an (m, k) @ (k, n) matmul (notebook 15's)."""
    a, b = torch.randn(m, k), torch.randn(k, n)
    repeats = min(20, max(3, 2**29 // (m * k * n)))
    return 2 * m * k * n / benchmark(lambda: a @ b, warmup=1, repeats=repeats).min


def run() -> dict[str, float | int | list]:
    """Return the MFU of gpt.Config() training on 1 thread, against its ceiling."""
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    import gpt

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cfg = gpt.Config()
        model = gpt.GPT(cfg)
        gpt.init_weights(model)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        x, y = gpt.batch(gpt.corpus(), 0, BATCH, cfg.block)

        def step() -> None:
            gpt.loss_fn(model(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        times = interleave({
            "ceiling": lambda: max(matmul_rate(n, n, n) for n in SIZES),
            "own": lambda: matmul_rate(x.numel(), cfg.dim, cfg.mlp * cfg.dim),
            "step": lambda: benchmark(step, warmup=1, repeats=3).median})
    finally:
        torch.set_num_threads(threads)
    peak, own = max(times["ceiling"]), max(times["own"])
    assert own <= 1.05 * peak, (
        f"the model's own matmul ran {own / 1e9:.1f} GFLOP/s, above the 'ceiling' "
        f"{peak / 1e9:.1f}: the ceiling was measured under load")
    work = x.numel() * gpt.flops_per_token(cfg, gpt.count_params(model))
    mfus = [work / t / peak for t in times["step"]]
    print(describe("gpt_cpu_mfu_1proc", mfus))
    return ratio_entry("gpt_cpu_mfu_1proc", mfus)
