"""What every distributed script in this folder shares: the group, the clock, records.

Copy the whole folder, not one file: every entry script imports this module and the
shared file of its own family (ddp_parts.py, pipe_stages.py, fsdp_model.py, gpt.py).
Only torch and the standard library are used.

- `setup` / `leave`: join and leave the process group torchrun describes;
- `log`: print once, on rank 0;
- `sync` / `clock`: wait for this rank's queued device work, then read the time;
- `nbytes`, `max_diff`, `full_state`: bytes held, and whole weights to compare;
- `save_record` / `load_record`: one typed record of results per script, as JSON
  (or torch.save, for a record holding tensors), checked field by field on load;
- `make_data`, `Net`: the images and CNN that the ddp_ and prof_ scripts train.
- `Traffic`: PyTorch's CommDebugMode, plus each collective's bytes (fsdp_, gpt_).
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import sys
import time
import types
import typing
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import TensorDataset

R = TypeVar("R")


def setup(device: str = "auto") -> torch.device:
    """Join the process group torchrun describes; return this rank's device."""
    if "LOCAL_RANK" not in os.environ:
        raise SystemExit(f"start me with torchrun, e.g. torchrun --standalone "
                         f"--nproc-per-node=2 {os.path.basename(sys.argv[0])}")
    local_rank = int(os.environ["LOCAL_RANK"])  # this process's index on its machine
    local_world = int(os.environ["LOCAL_WORLD_SIZE"])  # processes on this machine
    if device == "auto":  # a GPU for every process on this machine, or none
        device = "cuda" if torch.cuda.device_count() >= local_world else "cpu"
    if device == "cuda":
        if local_rank >= torch.cuda.device_count():
            raise SystemExit(f"local rank {local_rank} has no GPU of its own: "
                             f"{torch.cuda.device_count()} visible on this machine")
        dev = torch.device("cuda", local_rank)
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", device_id=dev)  # binds the group to this GPU
        return dev
    dist.init_process_group("gloo")
    atexit.register(time.sleep, 0.2)  # workaround: gloo's threads finish freeing
    return torch.device("cpu")


def leave() -> None:
    """Wait for every rank, then leave the process group."""
    dist.barrier()  # nobody leaves while the others still communicate
    dist.destroy_process_group()


def log(*parts: Any) -> None:
    """Print on rank 0 only, so that the job says each thing once."""
    if not dist.is_initialized() or dist.get_rank() == 0:
        print(*parts, flush=True)


def sync(device: torch.device) -> None:
    """Wait for the work queued on this rank's current stream (a CPU has none)."""
    if device.type == "cuda":
        # This stream only: torch.cuda.synchronize would also wait for nccl's stream,
        # where a receive posted early waits for its sender (see pipe_stages.py).
        torch.cuda.current_stream(device).synchronize()


def clock(device: torch.device) -> float:
    """Return perf_counter seconds once the work queued on `device` has finished."""
    sync(device)
    return time.perf_counter()


def nbytes(tensors: torch.Tensor | Iterable[torch.Tensor]) -> int:
    """Return the bytes these tensors hold on this rank (a DTensor: its local shard)."""
    if isinstance(tensors, torch.Tensor):
        tensors = [tensors]
    total = 0
    for t in tensors:
        local = t.to_local() if hasattr(t, "to_local") else t
        total += local.numel() * local.element_size()
    return total


def full_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """Return whole weights and buffers on the CPU by plain name, as PyTorch saves them.

    `get_model_state_dict` all-gathers DTensor shards and strips the prefixes that
    DDP, `torch.compile` and activation checkpointing add; every rank must call it.
    Its `cpu_offload=True` would fill rank 0's dict only, so each rank moves its own.
    """
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_model_state_dict,
    )

    state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))
    return {name: value.detach().cpu() for name, value in state.items()}


def max_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    """Return the largest |a - b| over two dicts of tensors with the same names."""
    if a.keys() != b.keys():
        raise KeyError(f"different names: {sorted(a.keys() ^ b.keys())}")
    return max((a[k].double() - b[k].double()).abs().max().item() for k in a)


def save_record(path: str | Path, record: Any) -> None:
    """Write a dataclass record of results atomically, named by its type: as JSON, or
    with torch.save where `path` ends in .pt (a record that holds tensors)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"record": type(record).__name__, **_plain(record)}
    tmp = path.with_suffix(".tmp")
    if path.suffix == ".pt":
        torch.save(body, tmp)
    else:
        tmp.write_text(json.dumps(body, indent=1))
    tmp.replace(path)


def load_record(path: str | Path, cls: type[R]) -> R:
    """Read a record written by `save_record`; a missing or renamed field raises,
    in a nested dataclass too, naming the fields."""
    path = Path(path)
    if path.suffix == ".pt":
        body = torch.load(path, weights_only=True)  # tensors and plain Python only
    else:
        body = json.loads(path.read_text())
    kind = body.pop("record", None)
    if kind != cls.__name__:
        raise TypeError(f"{path} holds a {kind} record, not a {cls.__name__}")
    return _typed(cls, body, str(path))


def _plain(value: Any) -> Any:
    """Return a record as dicts, lists and leaves (tensors are kept, not copied)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name))
                for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _typed(hint: Any, value: Any, where: str) -> Any:
    """Rebuild the dataclasses that `hint` names inside `value`, checking fields."""
    if dataclasses.is_dataclass(hint) and isinstance(value, dict):
        names = {f.name for f in dataclasses.fields(hint)}
        if value.keys() != names:
            raise KeyError(f"{where}: fields {sorted(value.keys() ^ names)} differ "
                           f"from {hint.__name__}'s (written by another version of "
                           f"the script?)")
        hints = typing.get_type_hints(hint)
        return hint(**{k: _typed(hints[k], v, f"{where}: {hint.__name__}.{k}")
                       for k, v in value.items()})
    args, origin = typing.get_args(hint), typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType) and value is not None:
        return _typed(next(a for a in args if a is not type(None)), value, where)
    if origin is list and isinstance(value, list):
        return [_typed(args[0], v, where) for v in value]
    if origin is dict and isinstance(value, dict):
        return {k: _typed(args[1], v, where) for k, v in value.items()}
    return value


def __getattr__(name: str) -> Any:
    """Define `Traffic` on first use: DTensor's import costs the DDP scripts time."""
    if name != "Traffic":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from torch.distributed.tensor import DTensor
    from torch.distributed.tensor.debug import CommDebugMode
    from torch.utils._pytree import tree_leaves

    class Traffic(CommDebugMode):
        """PyTorch's CommDebugMode, which counts the collectives run inside it (a
        DTensor's too), plus what it lacks: each call's size, that of its largest
        tensor (an all-gather's gathered output, an all-reduce's summed tensor).

        `sizes`: (name, elements, bytes) per call, in order; `calls` and `bytes`: by
        name, e.g. "allgather_base" (FSDP2), "all_reduce" (DTensor), "allreduce".
        """

        def __init__(self) -> None:
            super().__init__()
            self.sizes: list[tuple[str, int, int]] = []
            self.advanced_module_tracker = _NoModules()  # workaround: see below

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if any(issubclass(t, DTensor) for t in types):  # DTensor runs its ops and
                return NotImplemented  # their collectives come back here, as plain ones
            if getattr(func, "namespace", None) not in _COLLECTIVES:  # compute: run it,
                return func(*args, **(kwargs or {}))  # skip CommDebugMode's log of ops
            before = self.get_total_counts()
            out = super().__torch_dispatch__(func, types, args, kwargs)
            if self.get_total_counts() > before:  # CommDebugMode counted a collective
                big = max((t for t in tree_leaves((args, out))
                           if isinstance(t, torch.Tensor)), key=torch.Tensor.numel,
                          default=torch.empty(0))
                self.sizes.append((_short(func), big.numel(),
                                   big.numel() * big.element_size()))
            return out

        @property
        def calls(self) -> dict[str, int]:
            """Return {collective: calls}, by short name."""
            return {_short(op): n for op, n in self.get_comm_counts().items()}

        @property
        def bytes(self) -> dict[str, int]:
            """Return {collective: bytes of its largest tensors, summed over calls}."""
            out: dict[str, int] = {}
            for kind, _, size in self.sizes:
                out[kind] = out.get(kind, 0) + size
            return out

    globals()["Traffic"] = Traffic  # later look-ups find it at once
    return Traffic


# the operator namespaces of the collectives CommDebugMode counts; a step runs
# thousands of others, and CommDebugMode logs each one, doubling a step's time
_COLLECTIVES = ("c10d", "_c10d_functional", "c10d_functional", "_dtensor")


class _NoModules:
    """Stand in for CommDebugMode's tracker of modules, which counting does not need.

    Its hooks turn each module's output into a view (FSDP2 warns of it), and in torch
    2.11 they pile up over repeated forwards until one fails; so every collective is
    counted under "Global", the name CommDebugMode gives what runs outside a module.
    """

    name, is_bw, activation_checkpointing = "Global", False, False

    def __init__(self) -> None:
        self.module_parents_dict: dict[str, set] = {"Global": set()}

    def __enter__(self) -> _NoModules:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def _short(op: Any) -> str:
    """Return a collective's short name: c10d._allgather_base_ -> allgather_base."""
    return str(op).split(".")[1].strip("_")  # namespace.name[.overload]


# --- The workload of the ddp_ scripts, which prof_step.py profiles ------------------


def make_data(samples: int, size: int, seed: int) -> TensorDataset:
    """Return noisy images labelled by their brightest quadrant (4 classes)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, 1, size, size, generator=g)
    y = torch.randint(0, 4, (samples,), generator=g)
    h = size // 2
    for label, (r, c) in enumerate([(0, 0), (0, h), (h, 0), (h, h)]):
        x[y == label, :, r:r + h, c:c + h] += 0.3
    return TensorDataset(x, y)


class Net(nn.Module):
    """Three 3x3 convolutions and a linear head: much compute, few weights."""

    def __init__(self, width: int = 16, classes: int = 4):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1), nn.ReLU(),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(),
            nn.Conv2d(2 * width, 2 * width, 3, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(2),
        )
        self.head = nn.Linear(2 * width * 4, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))
