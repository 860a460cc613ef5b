"""A worker for `torch.multiprocessing.spawn` that lives in an importable module.

`mp.spawn` starts fresh interpreters, and each one finds the function to run by
importing it: module name plus function name. A function defined in a notebook
lives in the notebook's `__main__`, which a fresh interpreter cannot import; a
function in a file like this one can be imported, so this works. Notebook 09 spawns
it. It imports only torch, but is part of the folder you copy.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
import torch.distributed as dist


def all_reduce_worker(rank: int, world_size: int, port: int, out_dir: str) -> None:
    """Join a gloo group, all-reduce `rank + 1`, and write the sum to out_dir/rank."""
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            rank=rank, world_size=world_size)
    value = torch.tensor([rank + 1.0])
    dist.all_reduce(value)  # every rank ends with 1 + 2 + ... + world_size
    Path(out_dir, f"{rank}.txt").write_text(f"{value.item():g}")
    dist.barrier()
    dist.destroy_process_group()
    # Workaround, not part of DDP: a gloo shutdown race can abort a process that exits
    # while gloo's threads still free the last tensors; a short pause avoids it.
    time.sleep(0.2)
