"""Notebook 02's device checks on faked GPUs, outside the notebook: stand-in tensors on
cuda:0 and cuda:1, and a faked current GPU, so that a CPU run still fails the answers
that are wrong only on a GPU machine. The notebook's own cells are loaded (stdlib
json: no Jupyter needed)."""

from __future__ import annotations

import contextlib
import io
import json
from unittest import mock

import pytest
import torch
from conftest import NOTEBOOK_DIR

from helpers import check

NOTEBOOK = NOTEBOOK_DIR / "02_devices.ipynb"
CELLS = ("cell-049-a", "cell-049-b", "cell-049-c", "cell-055-a", "cell-055-b",
         "cell-055-d", "cell-055-c")
RIGHT_FULL = ("def full(d):\n    d = torch.device(d)\n"
              "    if d.type == 'cuda' and d.index is None:\n"
              "        return torch.device('cuda', torch.cuda.current_device())\n"
              "    return d\n")


@pytest.fixture()
def ns() -> dict:
    """Return the namespace of the notebook's exercise 1 and 3 checks."""
    cells = {c.get("id"): c for c in json.loads(NOTEBOOK.read_text())["cells"]}
    space = {"torch": torch, "contextlib": contextlib, "mock": mock}
    for cid in CELLS:
        exec(compile("".join(cells[cid]["source"]), f"<{cid}>", "exec"), space)  # noqa: S102
    return space


def _said(answer, test) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        check(answer, test=test)
    return out.getvalue()


@pytest.mark.parametrize("code, right", [
    (RIGHT_FULL, True),
    ("def full(d):\n    d = torch.device(d)\n"
     "    if d.type != 'cuda':\n        return d\n"
     "    return torch.device('cuda', d.index or torch.cuda.current_device())\n",
     False),
    ("def full(d):\n    if d == 'cuda':\n"
     "        return torch.device('cuda', torch.cuda.current_device())\n"
     "    return torch.device(d)\n", False),
])
def test_full_device_on_a_faked_current_gpu(ns, code, right):
    exec(code, ns)  # noqa: S102
    said = _said(ns["full"], ns["test_other_devices"])
    assert said.startswith("right" if right else "not yet"), said


def test_the_index_or_trick_is_told_why(ns):
    exec(RIGHT_FULL.replace("d.index is None", "not d.index"), ns)  # noqa: S102
    said = _said(ns["full"], ns["test_other_devices"])
    assert "cuda:0" in said and "index 0 is not missing" in said, said


def test_same_device_sees_two_gpus_of_one_type(ns):
    exec("def by_type(*ts):\n    found = {t.device.type for t in ts}\n"  # noqa: S102
         "    if len(found) != 1:\n        raise ValueError(str(found))\n"
         "    return ts[0].device\n", ns)
    said = _said(ns["by_type"], ns["test_same_device"])
    assert said.startswith("not yet") and "cuda:0 and cuda:1" in said, said
    assert ns["OnDevice"]("cuda:1").device == torch.device("cuda", 1)


@pytest.mark.parametrize("message", ["f'tensors are on {found}'",  # repr: device(...)
                                     "f'tensors are on {sorted(map(str, found))}'"])
def test_a_mix_named_as_str_or_repr_is_right(ns, message):
    exec("def same(*tensors):\n"  # noqa: S102
         "    found = {t.device for t in tensors}\n"
         "    if len(found) != 1:\n"
         f"        raise ValueError({message})\n"
         "    return found.pop()\n", ns)
    said = _said(ns["same"], ns["test_same_device"])
    assert said.startswith("right"), said
