"""Notebook 15's MFU cell on faked GPUs: a CPU run prints no MFU, so these tests run
the notebook's own cell with torch.cuda's device name faked, and check which peak it
divides by (the datasheet's in the step's dtype, never a GH200 read as an H200)."""

from __future__ import annotations

import contextlib
import io
import json
import math
import statistics
import sys

import pytest
import torch
from conftest import NOTEBOOK_DIR

from helpers import verdict

NOTEBOOK = NOTEBOOK_DIR / "15_transformer.ipynb"


def _cell(cell_id: str) -> str:
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    return next("".join(c["source"]) for c in cells if c["id"] == cell_id)


@pytest.fixture(scope="module")
def gpt():
    if str(NOTEBOOK_DIR / "scripts") not in sys.path:
        sys.path.insert(0, str(NOTEBOOK_DIR / "scripts"))
    import gpt
    return gpt


def _run_mfu_cell(gpt, monkeypatch, name: str, dtype: torch.dtype) -> str:
    """Run the MFU cell as on a CUDA GPU called `name`; return what it printed."""
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    fpt = 1_000_000  # FLOPs per token; 100e6 tokens/s: 1e14 FLOP/s of model FLOPs
    ns = {"torch": torch, "gpt": gpt, "statistics": statistics, "math": math,
          "verdict": verdict, "on_cuda": True, "device": torch.device("cuda", 0),
          "DTYPE": dtype, "fpt": fpt, "rates": [100e6] * 3, "ceiling": 5e14,
          "share": 20.0, "shares": [19.0, 20.0, 21.0]}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(_cell("cell-021"), ns)
    return out.getvalue()


@pytest.mark.parametrize("name, dtype, peak", [
    ("NVIDIA H200", torch.bfloat16, 989), ("NVIDIA H200 NVL", torch.bfloat16, 835),
    ("NVIDIA H100 80GB HBM3", torch.bfloat16, 989), ("Tesla T4", torch.float16, 65),
    ("NVIDIA A100-SXM4-40GB", torch.bfloat16, 312)])
def test_mfu_divides_by_the_datasheet_peak(gpt, monkeypatch, name, dtype, peak):
    said = _run_mfu_cell(gpt, monkeypatch, name, dtype)
    mfu = 1e14 / (peak * 1e12)
    assert f"MFU {mfu:.2%} of the datasheet's {peak} TFLOP/s" in said, said
    assert f"measured ceiling is {5e14 / (peak * 1e12):.0%}" in said, said
    assert "share of the measured matmul ceiling" in said, said


def test_no_mfu_without_a_datasheet_figure_in_that_dtype(gpt, monkeypatch):
    said = _run_mfu_cell(gpt, monkeypatch, "Tesla T4", torch.bfloat16)
    assert "no datasheet peak" in said and "MFU 0" not in said, said
    said = _run_mfu_cell(gpt, monkeypatch, "NVIDIA GeForce RTX 4090", torch.bfloat16)
    assert "no datasheet peak" in said, said


def test_gh200_is_not_read_as_an_h200(gpt, monkeypatch):
    table = {k: v for k, v in gpt.DATASHEET.items() if k != "GH200"}
    monkeypatch.setattr(gpt, "DATASHEET", table)
    said = _run_mfu_cell(gpt, monkeypatch, "NVIDIA GH200 480GB", torch.bfloat16)
    assert "no datasheet peak" in said, said


def test_ceiling_sizes_follow_the_device():
    """The ceiling's matmuls are sized for the device: not a CPU's on MPS or CUDA."""
    ns: dict = {"torch": torch, "benchmark": None}
    for kind, want in (("cpu", (256, 512, 1024)), ("mps", (1024, 2048)),
                       ("cuda", (4096, 8192))):
        ns["device"] = torch.device(kind)
        fake_cuda = kind == "cuda"
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(torch.cuda, "is_bf16_supported",
                       lambda including_emulation=True, on=fake_cuda: on)
            exec(_cell("cell-017"), ns)
        assert ns["SIZES"] == want, (kind, ns["SIZES"])
        assert ns["DTYPE"] == (torch.bfloat16 if fake_cuda else torch.float32), kind


def test_a_gpu_without_native_bf16_steps_in_float16():
    """A T4 (no native bf16): float16 autocast, whose GradScaler cell 18 enables."""
    ns: dict = {"torch": torch, "benchmark": None, "device": torch.device("cuda")}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(torch.cuda, "is_bf16_supported", lambda including_emulation=True:
                   including_emulation)  # emulated only, as on sm75
        exec(_cell("cell-017"), ns)
    assert ns["AMP"] == ns["DTYPE"] == torch.float16, ns["DTYPE"]
    assert ns["SIZES"] == (4096, 8192)
