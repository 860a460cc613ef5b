"""Run the course's benchmarks outside nbval and write bench/results.json.

Each `bench/bench_*.py` module has `run() -> dict` and `KEYS`, the names run()
returns; their results are merged, printed as a table and saved with the machine they
ran on. A ratio of two timings is the median of per-pair ratios (bench/pairs.py):
`<key>`, `<key>_spread` = [lowest, highest] pair ratio, `<key>_pairs` = n.
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results.json"
# What some keys should reach, printed beside them (the issues that asked for them).
GOALS = {
    "fsdp_cpu_param_bytes_ratio": "ideal 0.5, goal <= 0.55",
    "fsdp_cpu_max_param_diff": "float64, goal <= 1e-5",
    "fsdp_cpu_step_ratio": "FSDP2 / DDP step; above 1: more traffic",
    "ddp_overlap_fraction": "all-reduce time during backward, 8 buckets; must be > 0",
    "gpt_cpu_matmul_ceiling_share_1proc": "vs the 1-thread matmul ceiling, not MFU; "
                                          "tiny models: far below 1",
    "gpt_fsdp_tp_max_param_diff": "float64, goal <= 1e-10",
    "gpt_meta_init_peak_ratio": "0.25 + 3x the largest parameter on a CPU, goal < 1",
    "gpt_resume_reshard_max_diff": "a load copies: goal 0",
    "plan_llama8b_fsdp8_peak_gib": "torchtitan's recipe, all 32 blocks; its "
                                   "reserved 82.4 (cited): goal 63.4-82.4",
    "plan_llama70b_fsdp64_peak_gib": "full recompute, all 80 blocks; torchtitan ran "
                                     "it on 80 GB A100s (cited): goal < 80",
    "plan_notebook_s": "notebook 17 once, kernel start included; goal < 60",
}


def _modules(only: list[str]) -> list[str]:
    names = sorted(p.stem for p in HERE.glob("bench_*.py"))
    return [n for n in names if not only or any(o in n for o in only)]


def keys(only: list[str] | None = None) -> list[str]:
    """Return every key the selected benchmarks write (without running them)."""
    return [key for name in _modules(only or [])
            for key in importlib.import_module(f"bench.{name}").KEYS]


def _shown(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):  # a spread: [lowest, highest]
        return "[" + ", ".join(f"{v:.3g}" for v in value) + "]"
    return str(value)


def main(argv: list[str] | None = None) -> int:
    """Run the selected benchmarks, print a table and write results.json."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("only", nargs="*", help="substrings of benchmark names to run")
    args = parser.parse_args(argv)
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    for name in _modules(args.only):
        t0 = time.perf_counter()
        print(f"== {name}", flush=True)
        module = importlib.import_module(f"bench.{name}")
        result = module.run()
        if set(result) != set(module.KEYS):
            raise RuntimeError(f"bench.{name} returned {sorted(result)}, "
                               f"but its KEYS are {sorted(module.KEYS)}")
        results.update(result)
        print(f"   ({time.perf_counter() - t0:.0f} s)", flush=True)
    results["machine"] = (f"{platform.machine()}, {torch.get_num_threads()} threads, "
                          f"torch {torch.__version__}")
    RESULTS.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    width = max(map(len, results))
    for key, value in sorted(results.items()):
        goal = f"  ({GOALS[key]})" if key in GOALS else ""
        print(f"{key:<{width}}  {_shown(value)}{goal}")
    print(f"wrote {RESULTS.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
