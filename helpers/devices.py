"""Find, choose, hide and describe the devices PyTorch can use.

Every function asks torch when it is called, so importing `helpers` never initialises
CUDA. Each docstring ends with the notebooks that use it.
"""

from __future__ import annotations

import numbers
import os
import platform
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass

import torch

__all__ = ["RankPlan", "env_report", "fallback_device", "fresh_python", "num_gpus",
           "rank_plan", "try_all_gpus", "try_gpu"]


def num_gpus() -> int:
    """Return how many CUDA GPUs this process sees (01, 02, 04, 08, 09, 11-14, 18)."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def fallback_device() -> torch.device:
    """Return the best non-CUDA device: `mps` if usable, else `cpu` (notebook 02)."""
    return torch.device("mps" if torch.backends.mps.is_available() else "cpu")


def try_gpu(i: int = 0, verbose: bool = True) -> torch.device:
    """Return cuda:i if it exists, else the fallback, saying why (01-10, 12-15, 18)."""
    if isinstance(i, bool) or not isinstance(i, numbers.Integral) or i < 0:
        raise ValueError(
            f"try_gpu(i) needs a GPU index >= 0, got {i!r}. "
            "GPUs are numbered 0, 1, ... as listed by torch.cuda.device_count()."
        )
    n = num_gpus()
    if i < n:
        return torch.device(f"cuda:{int(i)}")  # int(): numpy and torch integers too
    dev = fallback_device()
    if verbose:
        plural = "s" if n != 1 else ""
        have = f"only {n} GPU{plural} (cuda:0..cuda:{n - 1})" if n else "no CUDA GPU"
        print(f"try_gpu({i}): this machine has {have}; falling back to {dev}.")
    return dev


def try_all_gpus() -> list[torch.device]:
    """Return every CUDA GPU, or `[device('cpu')]` when there is none (notebook 02)."""
    n = num_gpus()
    return [torch.device(f"cuda:{i}") for i in range(n)] or [torch.device("cpu")]


@dataclass(frozen=True)
class RankPlan:
    """Where a launch's ranks run: how many, on what, over which backend (10-16, 18)."""

    world: int
    device: str  # "cuda" (one GPU per rank) or "cpu"; the scripts' --device value
    backend: str  # "nccl" or "gloo"
    why: str  # one sentence a notebook prints before it launches


def rank_plan(world: int | None = None) -> RankPlan:
    """Choose the ranks of a launch: one GPU each over nccl, else CPU processes (gloo).

    `world=None` takes every GPU when there are two or more, else 2 CPUs (10-16, 18).
    """
    gpus = num_gpus()
    want = world if world is not None else (gpus if gpus >= 2 else 2)
    if want < 1:
        raise ValueError(f"a launch needs at least 1 rank, got world={want}")
    if gpus >= want:
        return RankPlan(want, "cuda", "nccl",
                        f"{want} rank(s) on {want} GPU(s) over nccl, one GPU per rank")
    if gpus:
        why = (f"{want} ranks need {want} GPUs for nccl (one GPU per rank) and this "
               f"machine has {gpus}: the ranks run as CPU processes over gloo")
    elif fallback_device().type == "mps":
        why = ("the Apple GPU has no collective backend: the ranks run as CPU "
               "processes over gloo")
    else:
        why = "no CUDA GPU: the ranks run as CPU processes over gloo"
    return RankPlan(want, "cpu", "gloo", why)


# Where nvidia-smi often is when it is not on PATH: WSL, and older Windows drivers.
_SMI_ELSEWHERE = ("/usr/lib/wsl/lib/nvidia-smi",
                  r"C:\Program Files\NVIDIA Corporation\NVSMI\nvidia-smi.exe")


def _find_nvidia_smi() -> str | None:
    """Return the path of `nvidia-smi`: on PATH, else in a known place, else None."""
    found = shutil.which("nvidia-smi")
    return found or next((p for p in _SMI_ELSEWHERE if os.path.isfile(p)), None)


def _nvidia_smi(cuda_works: bool = False) -> str:
    """Return a short `nvidia-smi` summary, or why there is none."""
    exe = _find_nvidia_smi()
    if exe is None:
        why = (", yet CUDA works (a driver without its command-line tool: Windows "
               "PATH, a container, WSL)") if cuda_works else (
            " (usually no NVIDIA driver; Windows, containers and WSL can have one "
            "without nvidia-smi on PATH)")
        return "nvidia-smi: not found" + why
    query = "--query-gpu=index,name,memory.total,driver_version"
    try:
        out = subprocess.run([exe, query, "--format=csv,noheader"], text=True,
                             capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"nvidia-smi: failed to run ({err.__class__.__name__})"
    lines = (out.stdout or out.stderr).strip().splitlines() or ["no output"]
    return "nvidia-smi:\n  " + "\n  ".join(lines)


def _accelerator() -> str:
    """Return what `torch.accelerator` reports, or that it has none."""
    acc = getattr(torch, "accelerator", None)
    if acc is None or not acc.is_available():
        return "torch.accelerator: none available (code will run on the CPU)"
    return (f"torch.accelerator: {acc.current_accelerator()} x {acc.device_count()}, "
            f"current index {acc.current_device_index()}")


def env_report() -> str:
    """Return a one-screen report of versions, devices and drivers (01, 18)."""
    cudnn = torch.backends.cudnn.is_available() and torch.backends.cudnn.version()
    lines = [
        f"python {platform.python_version()}, torch {torch.__version__}, "
        f"built for CUDA {torch.version.cuda or 'none'}, cuDNN {cudnn or 'none'}",
        f"CPU: {platform.machine()}, {torch.get_num_threads()} torch threads",
    ]
    n = num_gpus()
    if n == 0:
        lines.append("CUDA GPUs: none visible (torch.cuda.is_available() is False)")
    for i in range(n):
        p = torch.cuda.get_device_properties(i)
        lines.append(f"cuda:{i}: {p.name}, {p.total_memory / 2**30:.1f} GiB, "
                     f"compute capability {p.major}.{p.minor}")
    if fallback_device().type == "mps":
        lines.append("mps: Apple GPU available")
    lines += [_accelerator(), _nvidia_smi(cuda_works=n > 0)]
    return "\n".join(lines)


def fresh_python(code: str, env: Mapping[str, str | None] | None = None,
                 timeout: float = 120.0) -> str:
    """Run `code` in a new Python with `env` (None unsets); return output (04, 07)."""
    merged = {**os.environ, **(env or {})}
    child_env = {k: v for k, v in merged.items() if v is not None}  # None: unset it
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=child_env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=timeout)
    text = out.stdout.rstrip()
    if out.returncode != 0:
        tail = "\n".join(text.splitlines()[-10:])
        raise RuntimeError(f"child Python exited with {out.returncode}:\n{tail}")
    return text
