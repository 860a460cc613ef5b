"""Notebook 12's device-dependent check (exercise 4) on faked device pairs.

The check runs the learner's `copy_bandwidth` on two stand-in devices of its own (the
CPU and `meta`), so its verdict must not depend on the machine: the same answers get
the same verdicts whether the notebook's dev0 and dev1 are one CPU, two GPUs or MPS,
and the notebook's own dev0, dev1 and synchronize are left as they were.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import sys

import pytest
import torch
from conftest import NOTEBOOK_DIR
from torch import nn

from helpers import benchmark, check, synchronize

sys.path.insert(0, str(NOTEBOOK_DIR / "scripts"))
import pipe_stages  # noqa: E402  (as the notebook imports it)

CELLS = {c["id"]: "".join(c["source"]) for c in json.loads(
    (NOTEBOOK_DIR / "12_model_parallel.ipynb").read_text())["cells"]}
PAIRS = {"one CPU": ("cpu", "cpu"), "two GPUs": ("cuda:0", "cuda:1"),
         "one GPU": ("cuda:0", "cuda:0"), "MPS": ("mps", "mps")}
WITHIN_DEV0 = """def copy_bandwidth(batch, timer=benchmark):
    a = torch.randn(batch, *pipe_stages.cut_shape(IMAGE), device=dev0)
    buf = torch.empty_like(a)
    t = timer(lambda: (buf.copy_(a), synchronize(dev0)), device=dev0)
    return a.numel() * a.element_size() / 2**30 / t.median"""
NO_DEVICE = """def copy_bandwidth(batch, timer=benchmark):
    a = torch.randn(batch, *pipe_stages.cut_shape(IMAGE), device=dev0)
    buf = torch.empty_like(a, device=dev1)
    t = timer(lambda: buf.copy_(a))
    return a.numel() * a.element_size() / 2**30 / t.median"""


def _namespace(dev0: str, dev1: str) -> dict:
    """The notebook's names that the checks read, with faked devices."""
    ns = {"torch": torch, "nn": nn, "math": math, "pipe_stages": pipe_stages,
          "IMAGE": 32,
          "benchmark": benchmark, "check": check, "synchronize": synchronize,
          "dev0": torch.device(dev0), "dev1": torch.device(dev1)}
    exec(CELLS["cell-12chk"], ns)  # the hidden checks cell
    return ns


def _said(ns: dict, code: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code, ns)
    return out.getvalue()


@pytest.mark.parametrize("pair", PAIRS, ids=list(PAIRS))
def test_copy_check_gives_the_same_verdicts_on_any_devices(pair):
    ns = _namespace(*PAIRS[pair])
    fakes = (ns["dev0"], ns["dev1"], ns["synchronize"])
    said = _said(ns, CELLS["cell-049"])  # the solution, which asserts its own check
    assert said.startswith("right"), said
    assert (ns["dev0"], ns["dev1"], ns["synchronize"]) == fakes, "names not restored"
    for wrong, why in ((WITHIN_DEV0, "not within one device"),
                       (NO_DEVICE, "the CPU's clock times only the queue")):
        exec(wrong, ns)
        said = _said(ns, "check(copy_bandwidth, test=test_bandwidth)")
        assert said.startswith("not yet") and why in said, said
        assert (ns["dev0"], ns["dev1"], ns["synchronize"]) == fakes
    assert torch.get_default_device().type == "cpu"


def test_copy_check_restores_a_default_device_left_behind():
    ns = _namespace("cpu", "cpu")
    exec("def copy_bandwidth(batch, timer=benchmark):\n"
         "    torch.set_default_device(dev1)\n"
         "    return 1.0", ns)
    said = _said(ns, "check(copy_bandwidth, test=test_bandwidth)")
    assert said.startswith("not yet"), said
    assert torch.get_default_device().type == "cpu", "the check left meta behind"


DEFAULT_DEVICE_ACTIVATION = """def copy_bandwidth(batch, timer=benchmark):
    a = torch.randn(batch, *pipe_stages.cut_shape(IMAGE))
    buf = torch.empty_like(a, device=dev1)
    t = timer(lambda: (buf.copy_(a), synchronize(dev1)), device=dev0)
    return a.numel() * a.element_size() / 2**30 / t.median"""


@pytest.mark.parametrize("pair", PAIRS, ids=list(PAIRS))
def test_copy_check_sees_an_activation_left_on_the_default_device(pair):
    # right on a CPU, where dev0 is the default device; on a GPU it times a
    # host-to-device copy: the check's second run puts dev0 elsewhere
    ns = _namespace(*PAIRS[pair])
    exec(DEFAULT_DEVICE_ACTIVATION, ns)
    said = _said(ns, "check(copy_bandwidth, test=test_bandwidth)")
    assert said.startswith("not yet") and "device=dev0" in said, said


def test_profile_check_wants_the_device_told_to_the_timer():
    ns = _namespace("cpu", "cpu")
    exec("def stage_profile(stage, inp):\n"
         "    t = benchmark(lambda: stage(inp).sum().backward(), warmup=1, repeats=5)\n"
         "    return sum(p.numel() for p in stage.parameters()), t.median", ns)
    said = _said(ns, "check(stage_profile, test=test_profile)")
    assert said.startswith("not yet") and "device=inp.device" in said, said
    assert ns["benchmark"] is benchmark, "the check left its spy behind"
    said = _said(ns, CELLS["cell-043"])  # the solution, which asserts its own check
    assert said.startswith("right"), said
