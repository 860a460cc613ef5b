"""Small models the notebooks share: an MLP for regression, a CNN for digits."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["MLP", "SmallCNN"]


class MLP(nn.Module):
    """Three linear layers with ReLU: the seed article's regression net."""

    def __init__(self, in_dim: int = 10, h1: int = 16, h2: int = 32, out_dim: int = 1):
        super().__init__()
        self.layer1 = nn.Linear(in_dim, h1)
        self.layer2 = nn.Linear(h1, h2)
        self.layer3 = nn.Linear(h2, out_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Map (N, in_dim) inputs to (N, out_dim) outputs."""
        x = torch.relu(self.layer1(x))
        x = torch.relu(self.layer2(x))
        return self.layer3(x)


class SmallCNN(nn.Module):
    """Two conv blocks and a linear head for (N, 1, H, W) images; `width` scales it."""

    def __init__(self, num_classes: int = 10, width: int = 16, in_channels: int = 1):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, width, 3, padding=1), nn.ReLU(),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(2),
        )
        self.head = nn.Linear(2 * width * 4, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Map images to class logits."""
        return self.head(self.features(x).flatten(1))
