"""Measure the course's headline GPU figures and collect them in one report.

    python -m tools.gpu_figures [--out reports/test_gpu] [--quick]

Measures matmul TFLOP/s per dtype, host-to-device bandwidth from pageable and from
pinned memory, and 1-GPU vs CPU speedups (a matmul, a CNN training step); merges
`make bench`'s bench/results.json and the benchmark report notebook's
reports/benchmark_report.json when they exist. Writes figures.json and figures.md.
`tools/test_gpu.sh` runs it last. Without CUDA it measures the CPU side only and
says so in the report.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from torch import nn

from helpers.devices import env_report, num_gpus
from helpers.models import SmallCNN
from helpers.timing import benchmark

__all__ = ["matmul_tflops", "copy_gbps", "train_step_seconds", "collect",
           "to_markdown", "main"]

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench" / "results.json"
NOTEBOOK_REPORT = ROOT / "reports" / "benchmark_report.json"
GPU_DTYPES = {"float32": torch.float32, "tf32": torch.float32,
              "bfloat16": torch.bfloat16, "float16": torch.float16}


def _hardware_dtypes(device: str) -> list[str]:
    """Return the GPU_DTYPES that `device` runs in hardware, not through emulation.

    TF32 needs compute capability 8.0 (Ampere); before it, "tf32" is plain float32.
    A T4 (Colab's free GPU, 7.5) has no bf16 units, yet is_bf16_supported() says True
    there by default, counting emulation: ask with including_emulation=False.
    """
    names = ["float32", "float16"]
    if torch.cuda.get_device_capability(device) >= (8, 0):
        names.insert(1, "tf32")
    try:
        bf16 = torch.cuda.is_bf16_supported(including_emulation=False)
    except TypeError:  # a torch without the argument counts hardware only
        bf16 = torch.cuda.is_bf16_supported()
    if bf16:
        names.append("bfloat16")
    return [n for n in GPU_DTYPES if n in names]


def matmul_tflops(device: str, n: int, dtype: str = "float32",
                  repeats: int = 10) -> float:
    """Return the median TFLOP/s of an n x n matmul in `dtype` ("tf32" allowed)."""
    a, b = (torch.randn(n, n, device=device, dtype=GPU_DTYPES[dtype]) for _ in "ab")
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if dtype == "tf32" else "highest")
    try:
        t = benchmark(lambda: a @ b, device=device, warmup=2, repeats=repeats)
    finally:
        torch.set_float32_matmul_precision(before)
    return 2 * n**3 / t.median / 1e12


def copy_gbps(device: str, mib: int, pinned: bool, repeats: int = 10) -> float:
    """Return host-to-device copy bandwidth in GB/s from pageable or pinned memory."""
    src = torch.empty(mib * 2**20, dtype=torch.uint8, pin_memory=pinned)
    dst = torch.empty_like(src, device=device)
    t = benchmark(lambda: dst.copy_(src, non_blocking=pinned), device=device,
                  warmup=2, repeats=repeats)
    return src.numel() / t.median / 1e9


def train_step_seconds(device: str, batch: int, size: int, width: int = 32,
                       repeats: int = 5) -> float:
    """Return the median seconds of one SmallCNN SGD step on random images."""
    torch.manual_seed(0)
    model = SmallCNN(width=width, in_channels=3).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(batch, 3, size, size, device=device)
    y = torch.randint(0, 10, (batch,), device=device)

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(x), y).backward()
        opt.step()

    return benchmark(step, device=device, warmup=2, repeats=repeats).median


def collect(quick: bool = False) -> dict:
    """Measure every figure this machine can give; CPU-only parts without CUDA."""
    n, n_gpu, mib, batch, size = ((512, 1024, 16, 16, 32) if quick
                                  else (4096, 8192, 512, 256, 64))
    step = f"SmallCNN train step b={batch} {size}px"
    fig: dict = {"environment": env_report(), "gpus": num_gpus(), "matmul_tflops": {},
                 "h2d_gbps": {}, "speedup_vs_cpu": {}, "seconds": {}}
    cpu_tflops = matmul_tflops("cpu", n, repeats=3)
    fig["matmul_tflops"][f"cpu float32 n={n}"] = cpu_tflops
    fig["seconds"][f"cpu {step}"] = train_step_seconds("cpu", batch, size, repeats=3)
    if num_gpus():
        dev = "cuda:0"
        fig["gpu_name"] = torch.cuda.get_device_name(0)
        for dtype in _hardware_dtypes(dev):
            fig["matmul_tflops"][f"cuda {dtype} n={n_gpu}"] = matmul_tflops(
                dev, n_gpu, dtype)
        for pinned in (False, True):
            kind = "pinned" if pinned else "pageable"
            fig["h2d_gbps"][f"{kind} {mib} MiB"] = copy_gbps(dev, mib, pinned)
        gpu_tflops = matmul_tflops(dev, n)
        fig["matmul_tflops"][f"cuda float32 n={n}"] = gpu_tflops
        fig["seconds"][f"cuda {step}"] = train_step_seconds(dev, batch, size)
        fig["speedup_vs_cpu"] = {
            f"matmul float32 n={n}": gpu_tflops / cpu_tflops,
            step: fig["seconds"][f"cpu {step}"] / fig["seconds"][f"cuda {step}"]}
    for key, path in (("bench", BENCH), ("benchmark_report", NOTEBOOK_REPORT)):
        fig[key] = json.loads(path.read_text()) if path.exists() else None
    return fig


def _table(title: str, rows: dict, unit: str,
           empty: str = "not measured: no CUDA GPU on this machine") -> list[str]:
    if not rows:
        return [f"## {title}", "", f"({empty})", ""]
    out = [f"## {title}", "", f"| what | {unit} |", "|---|---|"]
    out += [f"| {k} | {v:.4g} |" if isinstance(v, float) else f"| {k} | {v} |"
            for k, v in rows.items()]
    return [*out, ""]


def to_markdown(figures: dict) -> str:
    """Render the figures as a Markdown report."""
    lines = ["# make test-gpu: figures", "",
             f"GPU: {figures.get('gpu_name', 'none')} ({figures['gpus']} visible)", "",
             "```", figures["environment"], "```", ""]
    lines += _table("Matmul throughput", figures["matmul_tflops"], "TFLOP/s")
    lines += _table("Host-to-device copies", figures["h2d_gbps"], "GB/s")
    lines += _table("1 GPU vs CPU", figures["speedup_vs_cpu"], "speedup (x)")
    lines += _table("Timings", figures["seconds"], "seconds")
    bench = {k: v for k, v in (figures["bench"] or {}).items() if k != "machine"}
    lines += _table("make bench (bench/results.json)", bench, "value",
                    empty="no bench/results.json: run `make bench` first")
    report = figures["benchmark_report"]
    if report and "markdown" in report:
        body = report["markdown"].removeprefix("# ").partition("\n")
        lines += [f"## Benchmark report notebook: {body[0]}", body[2].strip(), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Measure, then write figures.json and figures.md into --out."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "test_gpu")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (for tests)")
    args = parser.parse_args(argv)
    figures = collect(quick=args.quick)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "figures.json").write_text(json.dumps(figures, indent=2) + "\n")
    report = to_markdown(figures)
    (args.out / "figures.md").write_text(report + "\n")
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
