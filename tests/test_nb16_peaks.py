"""Notebook 16's datasheet lookup for MFU, on the GPU names a CPU run never sees.

The notebook prints MFU only against a cited float64 peak found by the GPU's name;
here its own table and lookup run on names as torch reports them, so that an "H200"
pattern cannot match a GH200 and an H200 NVL gets its own figure.
"""

from __future__ import annotations

import ast
import re

import pytest
from conftest import NOTEBOOK_DIR, cell_sources

NOTEBOOK = NOTEBOOK_DIR / "16_transformer_sharded.ipynb"


def lookup():
    """Return the notebook's lookup as a function of the device's name."""
    source = next(s for s in cell_sources(NOTEBOOK).values() if "FP64 = {" in s)
    tree = ast.parse(source)
    wanted = [node for node in tree.body if isinstance(node, ast.Assign)
              and isinstance(node.targets[0], ast.Name)
              and node.targets[0].id in ("FP64", "sheet")]
    assert [n.targets[0].id for n in wanted] == ["FP64", "sheet"], "cell changed"
    code = compile(ast.Module(body=wanted, type_ignores=[]), str(NOTEBOOK), "exec")

    def peak(name: str) -> float | None:
        scope = {"re": re, "name": name}
        exec(code, scope)  # the notebook's own two statements
        return scope["sheet"]
    return peak


@pytest.mark.parametrize(("name", "tflops"), [
    ("NVIDIA H200", 67), ("NVIDIA H200 NVL", 60), ("NVIDIA GH200 480GB", None),
    ("NVIDIA H100 80GB HBM3", 67), ("NVIDIA H100 PCIe", 51), ("NVIDIA H100 NVL", 60),
    ("NVIDIA GH100", None), ("NVIDIA A100-SXM4-80GB", 19.5),
    ("NVIDIA A100 80GB PCIe", 19.5), ("Tesla T4", None), ("a CPU", None)])
def test_datasheet_peak_by_name(name, tflops):
    got = lookup()(name)
    want = None if tflops is None else tflops * 1e12
    assert got == want, f"{name}: {got}, want {want}"
