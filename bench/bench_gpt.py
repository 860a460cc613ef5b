"""MFU of notebook 15's transformer on one CPU process with 1 thread.

MFU = tokens/s x FLOPs per token (gpt.flops_per_token: 6N + 12 L T D) / peak, where
the peak is the measured matmul ceiling of the same thread (a 1024 x 1024 float32
matmul, a median of 3), as notebook 15 measures it. PAIRS rounds alternate a
ceiling and a training step's median of 3 (bench.pairs.interleave), so each round's
MFU compares two timings taken side by side; the key is the median over rounds with
the lowest and highest round.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from bench.pairs import describe, interleave, ratio_entry, ratio_keys
from helpers import benchmark

SCRIPTS = Path(__file__).resolve().parents[1] / "notebooks" / "scripts"
BATCH, N = 16, 1024
KEYS = ratio_keys("gpt_cpu_mfu_1proc")


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
        a, b = torch.randn(N, N), torch.randn(N, N)

        def step() -> None:
            gpt.loss_fn(model(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        times = interleave({
            "ceiling": lambda: benchmark(lambda: a @ b, warmup=1, repeats=3).median,
            "step": lambda: benchmark(step, warmup=1, repeats=3).median})
    finally:
        torch.set_num_threads(threads)
    work = x.numel() * gpt.flops_per_token(cfg, gpt.count_params(model))
    mfus = [work / t / (2 * N**3 / c)
            for t, c in zip(times["step"], times["ceiling"], strict=True)]
    print(describe("gpt_cpu_mfu_1proc", mfus))
    return ratio_entry("gpt_cpu_mfu_1proc", mfus)
