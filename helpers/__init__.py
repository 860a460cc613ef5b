"""Small shared helpers for the PyTorch-on-GPUs course.

Importing this package never touches CUDA or picks a device.
"""

from helpers.devices import (
    RankPlan,
    env_report,
    fallback_device,
    num_gpus,
    rank_plan,
    try_all_gpus,
    try_gpu,
)
from helpers.exercises import check
from helpers.launch import LaunchError, LaunchResult, torchrun
from helpers.plotting import bar_chart, line_plot
from helpers.timing import Timing, benchmark, paired_ratio, synchronize, verdict

__all__ = ["LaunchError", "LaunchResult", "RankPlan", "Timing", "bar_chart",
           "benchmark", "check", "env_report", "fallback_device", "line_plot",
           "num_gpus", "paired_ratio", "rank_plan", "synchronize", "torchrun",
           "try_all_gpus", "try_gpu", "verdict"]
