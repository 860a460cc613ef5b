"""Share of the measured matmul ceiling for notebook 15's transformer, 1 CPU thread.

tokens/s x FLOPs per token (gpt.flops_per_token: 6N + 12 L T D) / a measured ceiling,
as notebook 15 measures it: the best float32 matmul rate of the same thread over a few
square sizes (256, 512, 1024) and the model's own widest matmul, the best of all rounds
(a busy round can slow the large ones alone). This is not MFU, which divides by the
hardware's datasheet peak (PaLM, appendix B): no datasheet figure fits every CPU.
PAIRS rounds alternate those matmuls and a training step's median of 3
(bench.pairs.interleave); each round's share divides its step by that one ceiling, and
the key is the median over rounds with the lowest and highest round.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from bench.pairs import describe, interleave, ratio_entry, ratio_keys
from helpers import benchmark

SCRIPTS = Path(__file__).resolve().parents[1] / "notebooks" / "scripts"
BATCH, SIZES = 16, (256, 512, 1024)
KEY = "gpt_cpu_matmul_ceiling_share_1proc"
KEYS = ratio_keys(KEY)


def matmul_rate(m: int, k: int, n: int) -> float:
    """Return the best float32 FLOP/s of an (m, k) @ (k, n) matmul (notebook 15's)."""
    a, b = torch.randn(m, k), torch.randn(k, n)
    repeats = min(20, max(3, 2**29 // (m * k * n)))
    return 2 * m * k * n / benchmark(lambda: a @ b, warmup=1, repeats=repeats).min


def run() -> dict[str, float | int | list]:
    """Return gpt.Config() training's share of the 1-thread matmul ceiling."""
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
            "square": lambda: max(matmul_rate(n, n, n) for n in SIZES),
            "own": lambda: matmul_rate(x.numel(), cfg.dim, cfg.mlp * cfg.dim),
            "step": lambda: benchmark(step, warmup=1, repeats=3).median})
    finally:
        torch.set_num_threads(threads)
    ceiling = max(times["square"] + times["own"])
    work = x.numel() * gpt.flops_per_token(cfg, gpt.count_params(model))
    shares = [work / t / ceiling for t in times["step"]]
    print(describe(KEY, shares))
    return ratio_entry(KEY, shares)
