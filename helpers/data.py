"""Load the course's bundled datasets as ready-to-train tensors (no downloads)."""

from __future__ import annotations

import torch
from sklearn.datasets import load_diabetes, load_digits
from sklearn.model_selection import train_test_split

__all__ = ["diabetes_split", "digits_split"]

Split = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def _standardise(train: torch.Tensor, test: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Scale both parts with the training part's mean and standard deviation."""
    mean, std = train.mean(0), train.std(0)
    return (train - mean) / std, (test - mean) / std


def diabetes_split(test_size: float = 0.2, seed: int = 0) -> Split:
    """Return standardised diabetes data: X_train, X_test, y_train, y_test."""
    X, y = load_diabetes(return_X_y=True)
    parts = train_test_split(X, y, test_size=test_size, random_state=seed)
    X_tr, X_te, y_tr, y_te = (torch.tensor(p, dtype=torch.float32) for p in parts)
    X_tr, X_te = _standardise(X_tr, X_te)
    y_tr, y_te = _standardise(y_tr.unsqueeze(1), y_te.unsqueeze(1))
    return X_tr, X_te, y_tr, y_te


def digits_split(test_size: float = 0.2, seed: int = 0) -> Split:
    """Return 8x8 digit images as (N, 1, 8, 8) floats in [0, 1] and integer labels."""
    X, y = load_digits(return_X_y=True)
    parts = train_test_split(X, y, test_size=test_size, random_state=seed, stratify=y)
    X_tr, X_te = (torch.tensor(p, dtype=torch.float32).view(-1, 1, 8, 8) / 16
                  for p in parts[:2])
    y_tr, y_te = (torch.tensor(p, dtype=torch.long) for p in parts[2:])
    return X_tr, X_te, y_tr, y_te
