"""Notebook 16's exact claims, from one launch of notebooks/scripts/gpt_lessons.py on 4
CPU processes with 1 thread each (the notebook's own launch).

- gpt_fsdp_tp_max_param_diff: the 2 x 2 FSDP2 x TP mesh vs one process after the same
  float64 steps, largest weight difference (goal <= 1e-10).
- gpt_meta_init_peak_ratio: the most bytes one rank held while building and
  initialising Config(layers=8) on the meta device, over the whole model's bytes,
  the largest over the 4 ranks (on a CPU: 0.25 plus three times the largest
  parameter's float32 bytes, drawn whole in float64 and cast).
- gpt_resume_reshard_max_diff: the mesh's DCP checkpoint (weights and Adam state)
  resumed as FSDP2 on 2 ranks vs the mesh's own tensors at that step, read with
  gpt_fsdp.gathered_state, largest difference over every tensor (goal 0: a load copies).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from helpers.launch import torchrun

SCRIPT = Path(__file__).resolve().parents[1] / "notebooks/scripts/gpt_lessons.py"
KEYS = ("gpt_fsdp_tp_max_param_diff", "gpt_meta_init_peak_ratio",
        "gpt_resume_reshard_max_diff")


def run() -> dict[str, float]:
    """Launch gpt_lessons.py once; return the three keys from its result files."""
    if str(SCRIPT.parent) not in sys.path:
        sys.path.insert(0, str(SCRIPT.parent))
    import common  # the scripts' own comparison and records
    import gpt_build
    import gpt_lessons
    import gpt_mesh

    with tempfile.TemporaryDirectory() as out:
        torchrun(SCRIPT, "--out", out, "--device", "cpu", nproc=4, threads=1,
                 echo=False, timeout=600)
        mesh = [common.load_record(Path(out) / f"mesh_r{r}.pt", gpt_mesh.MeshRun)
                for r in range(4)]
        two = common.load_record(Path(out) / "fsdp_r0.pt", gpt_lessons.Pair)
        builds = [common.load_record(Path(out) / f"build_r{r}.json",
                                     gpt_build.BuildPeak) for r in range(4)]
    resumed, single = two.resume.dcp_k, two.strategies["single"]["params"]
    peak = max(b.meta / b.full for b in builds)
    saved, tp = mesh[0].mesh_k_state, common.max_diff(mesh[0].mesh_k, single)
    return {"gpt_fsdp_tp_max_param_diff": tp,
            "gpt_meta_init_peak_ratio": peak,
            "gpt_resume_reshard_max_diff": max(
                (resumed[key].double() - saved[key].double()).abs().max().item()
                for key in saved)}
