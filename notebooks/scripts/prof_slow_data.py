"""A data set whose every item costs a fixed wait, as reading and decoding a file would.

Notebook 07 times DataLoader workers on it. It lives in a file, not in the notebook,
because a worker started with "spawn" (the default on macOS and Windows) or
"forkserver" (Linux from Python 3.14) imports the data set's class by name, and
cannot import one defined in a notebook. It needs only torch, so it works alone.
"""

from __future__ import annotations

import time

import torch
from torch.utils.data import Dataset


class SlowDataset(Dataset):
    """`n` seeded 3x16x16 images with targets; each item first waits `cost` seconds."""

    def __init__(self, n: int = 256, cost: float = 0.001) -> None:
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 3, 16, 16, generator=g)
        self.y = torch.randn(n, 1, generator=g)
        self.cost = cost

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(self.cost)  # stands in for I/O: it waits without using a core
        return self.x[i], self.y[i]
