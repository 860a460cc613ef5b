"""Choose which GPUs a process sees, and notice when it is too late to choose.

CUDA reads `CUDA_VISIBLE_DEVICES` once, when the driver starts in a process (the
first `torch.cuda.is_available()`, `torch.cuda.init()` or CUDA tensor; not
`torch.cuda.device_count()`, which PyTorch answers through NVML, re-reading the
variable, until its own CUDA initialisation). Changing the variable afterwards does not
change the process's GPUs, silently; it only reaches the processes it launches later.
Nothing here runs at import time.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap
import warnings
from collections.abc import Iterable, Mapping

import torch

__all__ = ["fresh_python", "cuda_started", "set_visible_devices"]

_DRIVER_NAMES = ("nvcuda.dll",) if sys.platform == "win32" else ("libcuda.so.1",
                                                                   "libcuda.so")
_CUDA_SUCCESS = 0  # cuDeviceGetCount returns 3 (NOT_INITIALIZED) before cuInit


def fresh_python(code: str, env: Mapping[str, str | None] | None = None,
                 timeout: float = 120.0) -> str:
    """Run `code` in a new Python (env values: set, or None to unset); return output."""
    child_env = dict(os.environ)
    for key, value in (env or {}).items():
        if value is None:
            child_env.pop(key, None)
        else:
            child_env[key] = value
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=child_env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         timeout=timeout)
    text = out.stdout.rstrip()
    if out.returncode != 0:
        tail = "\n".join(text.splitlines()[-10:])
        raise RuntimeError(f"child Python exited with {out.returncode}:\n{tail}")
    return text


def _load_driver() -> ctypes.CDLL | None:
    """Return the CUDA driver library, or None when this machine has none."""
    for name in _DRIVER_NAMES:
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def cuda_started() -> bool:
    """Return True once this process has started CUDA (its GPU list is then fixed)."""
    if torch.cuda.is_initialized():
        return True
    driver = _load_driver()
    if driver is None:
        return False
    count = ctypes.c_int(0)
    return driver.cuDeviceGetCount(ctypes.byref(count)) == _CUDA_SUCCESS


def set_visible_devices(devices: str | int | Iterable[int]) -> str:
    """Set CUDA_VISIBLE_DEVICES here and for children; warn if CUDA already started."""
    if isinstance(devices, str):
        value = devices
    elif isinstance(devices, int):
        value = str(devices)
    else:
        value = ",".join(str(int(d)) for d in devices)
    os.environ["CUDA_VISIBLE_DEVICES"] = value
    if cuda_started():
        warnings.warn(
            f"CUDA_VISIBLE_DEVICES={value!r} was set after CUDA started in this "
            "process, so this process keeps the GPUs it already sees; only processes "
            "launched from now on get the new list. Set it in the shell, or restart "
            "and set it before the first torch.cuda call.", RuntimeWarning,
            stacklevel=2)
    return value
