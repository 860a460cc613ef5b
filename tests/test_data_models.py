"""Bundled data loads as expected tensors, and the shared models fit their shapes."""

from __future__ import annotations

import torch

from helpers.models import MLP, SmallCNN, diabetes_split


def test_diabetes_split_shapes_and_scaling():
    X_tr, X_te, y_tr, y_te = diabetes_split()
    assert X_tr.shape == (353, 10) and X_te.shape == (89, 10)
    assert y_tr.shape == (353, 1) and X_tr.dtype == torch.float32
    assert torch.allclose(X_tr.mean(0), torch.zeros(10), atol=1e-5)
    assert torch.allclose(X_tr.std(0), torch.ones(10), atol=1e-5)


def test_diabetes_split_is_reproducible():
    a, b = diabetes_split(seed=1), diabetes_split(seed=1)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert not torch.equal(a[0], diabetes_split(seed=2)[0])


def test_models_map_shapes():
    assert MLP()(torch.randn(4, 10)).shape == (4, 1)
    assert SmallCNN()(torch.randn(4, 1, 8, 8)).shape == (4, 10)
    assert SmallCNN(width=4, in_channels=3)(torch.randn(2, 3, 32, 32)).shape == (2, 10)
