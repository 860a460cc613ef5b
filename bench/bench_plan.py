"""Notebook 17's plan, measured at full depth, and the notebook's own time.

- plan_llama8b_fsdp8_peak_gib: Llama 3 8B on a fake world of 8, FSDP2 in bf16 mixed
  precision, local batch 2 x 8,192 tokens, torchtitan's selective "op" recomputation
  and composite RMSNorm (its published configuration): FSDPMemTracker's allocated peak
  on rank 0, all 32 blocks built (the notebook extends 2 and 3 blocks). torchtitan
  read 82.4 GiB reserved (cited): the allocated peak must lie within 1/1.3 of it.
- plan_llama70b_fsdp64_peak_gib: Llama 3 70B on 64 ranks, local batch 1, full
  checkpointing, all 80 blocks: torchtitan's 64 A100 80GB run (cited) fitted it.
- plan_notebook_s: the notebook executed once, start to end, kernel start included.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "notebooks/scripts"
NOTEBOOK = ROOT / "notebooks/17_planning_at_scale.ipynb"
KEYS = ("plan_llama8b_fsdp8_peak_gib", "plan_llama70b_fsdp64_peak_gib",
        "plan_notebook_s")


def _full_depth(name: str, world: int, batch: int, recompute: str) -> float:
    """Return rank 0's peak GiB with every block built: no depth extension."""
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    import gpt_plan as plan

    layout = plan.Layout("fsdp", world, batch=batch, recompute=recompute,
                         norm="composite")
    with plan.fake_world(world):
        step = plan._run_once(plan.LLAMA[name], layout, collectives=False)
    return round(step.peak["Total"] / plan.GIB, 2)


def run() -> dict[str, float]:
    """Measure both plans at full depth, then execute the notebook once."""
    out = {"plan_llama8b_fsdp8_peak_gib": _full_depth("8B", 8, 2, "op"),
           "plan_llama70b_fsdp64_peak_gib": _full_depth("70B", 64, 1, "full")}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook",
                    "--execute", "--stdout", NOTEBOOK.name], cwd=NOTEBOOK.parent,
                   check=True, capture_output=True, timeout=600)
    out["plan_notebook_s"] = round(time.perf_counter() - start, 1)
    return out
