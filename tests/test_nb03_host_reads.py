"""Notebook 03's host-read counter, which exercise 3's check uses, on any machine: a
tensor counts as on the device when marked, made with device=, or computed from one,
so a CPU run tells a host read from a write that stays on the device. The notebook's
own cells are loaded (stdlib json: no Jupyter needed)."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import NOTEBOOK_DIR

NOTEBOOK = NOTEBOOK_DIR / "03_moving_data.ipynb"
CELLS = ("cell-043-b", "cell-3a03", "cell-3a05")


@pytest.fixture()
def count_host_reads():
    """Return the notebook's count_host_reads, defined from its own cells."""
    cells = {c.get("id"): c for c in json.loads(NOTEBOOK.read_text())["cells"]}
    ns = {"torch": torch, "contextlib": __import__("contextlib"),
          "TorchFunctionMode": torch.overrides.TorchFunctionMode}
    for cid in CELLS:
        exec(compile("".join(cells[cid]["source"]), f"<{cid}>", "exec"), ns)  # noqa: S102
    return ns["count_host_reads"]


def test_a_buffer_made_on_the_device_is_written_without_a_read(count_host_reads):
    w = torch.randn(4)
    with count_host_reads(w) as reads:
        buf = torch.empty(3, device="cpu")  # device=: the device's own buffer
        for i in range(3):
            buf[i] = (w * i).sum()
        buf[:2].tolist()
    assert reads == ["tolist"], reads


def test_writes_into_a_host_tensor_and_reads_of_values_count(count_host_reads):
    w = torch.randn(4)
    with count_host_reads(w) as reads:
        host = torch.empty(3)  # no device=: the host's
        for i in range(3):
            host[i] = (w * i).sum()
        float(w.sum())
        w.sum().item()
        w.to("cpu")
        torch.tensor([w.sum(), w.mean()])  # one read per value
        (w * 2).detach()  # stays on the device
    assert reads == ["__setitem__"] * 3 + ["__float__", "item", "to", "tensor",
                                           "tensor"], reads


def test_unmarked_tensors_are_the_hosts(count_host_reads):
    with count_host_reads() as reads:
        torch.randn(3).tolist()
    assert reads == [], reads


def test_a_read_of_what_was_read_back_is_no_second_read(count_host_reads):
    """On a CPU .cpu() and .to("cpu") return the tensor itself: one copy, not two."""
    w = torch.randn(4)
    with count_host_reads(w) as reads:
        block = torch.stack([w.sum(), w.mean()])  # computed on the device
        block.cpu().tolist()
        (block * 2).to("cpu").numpy()
        (block * 3).tolist()  # a new device tensor: a read of its own
    assert reads == ["cpu", "to", "tolist"], reads
