"""The models the notebooks train, the data they train on, and how far two results are.

sklearn and torchvision load when first used; nothing here touches CUDA. Each docstring
ends with the notebooks that use it.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    from torchvision.models import ResNet

__all__ = ["MLP", "STAGE_TOLERANCE", "SmallCNN", "diabetes_split", "make_resnet",
           "max_rel_diff", "split_stages", "training_memory"]

# the largest max_rel_diff between a model cut in stages and the whole model (12, 13)
STAGE_TOLERANCE = 1e-4


class MLP(nn.Module):
    """Three linear layers with ReLU: the seed article's net (notebooks 03, 05, 08)."""

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
    """Two conv blocks and a linear head for (N, 1, H, W) images (notebook 05)."""

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


def diabetes_split(test_size: float = 0.2, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Return standardised diabetes data: X_train, X_test, y_train, y_test (05, 08)."""
    from sklearn.datasets import load_diabetes
    from sklearn.model_selection import train_test_split

    X, y = load_diabetes(return_X_y=True)
    parts = train_test_split(X, y, test_size=test_size, random_state=seed)
    X_tr, X_te, y_tr, y_te = (torch.tensor(p, dtype=torch.float32).reshape(len(p), -1)
                              for p in parts)  # y: one column
    # scale each part by the training part's mean and standard deviation
    return tuple((t - ref.mean(0)) / ref.std(0)
                 for t, ref in ((X_tr, X_tr), (X_te, X_tr), (y_tr, y_tr), (y_te, y_tr)))


def make_resnet(num_classes: int = 10, norm: str = "batch", seed: int = 0) -> ResNet:
    """Return a seeded, untrained ResNet-18 less layer4: ResNet-14 (notebooks 12-14)."""
    # torchvision's, cut by name in 12-14; scripts/pipe_stages.py: the same in torch
    from torchvision.models import resnet18

    if norm not in ("batch", "group"):
        raise ValueError(f"norm must be 'batch' or 'group', got {norm!r}")
    torch.manual_seed(seed)
    layer = None if norm == "batch" else partial(nn.GroupNorm, 8)  # 8 groups
    model = resnet18(weights=None, num_classes=num_classes, norm_layer=layer)
    # layer4 holds 8.4 M of resnet18's 11.2 M parameters but sees only 1/32 of the
    # image's side (2x2 pixels of a 64x64 image): without it CPU runs are fast
    model.layer4 = nn.Identity()
    model.fc = nn.Linear(256, num_classes)
    return model


def split_stages(model: ResNet) -> tuple[nn.Sequential, nn.Sequential]:
    """Cut `make_resnet`'s model after layer1 in two stages (notebooks 12-14)."""
    m = model
    stage1 = nn.Sequential(m.conv1, m.bn1, m.relu, m.maxpool, m.layer1)
    stage2 = nn.Sequential(m.layer2, m.layer3, m.avgpool, nn.Flatten(1), m.fc)
    return stage1, stage2


def max_rel_diff(got: Sequence[torch.Tensor], ref: Sequence[torch.Tensor]) -> float:
    """Return the largest |got - ref|, each scaled by its max |ref| (12-14)."""
    return max(((g.detach().cpu() - r.detach().cpu()).abs().max()
                / r.detach().abs().max().clamp_min(1e-30)).item()
               for g, r in zip(got, ref, strict=True))


def training_memory(num_params: int, bytes_per_param: int = 4,
                    optimizer_states: int = 2) -> dict[str, int]:
    """Return bytes of parameters, gradients, optimizer state; Adam keeps 2 (12, 14)."""
    params = num_params * bytes_per_param
    return {"params": params, "grads": params, "optimizer": optimizer_states * params,
            "total": (2 + optimizer_states) * params}
