"""Tests of CUDA_VISIBLE_DEVICES: helpers.devices.fresh_python, and the driver and
"too late" paths of notebook 04's cuda_started and set_visible_devices that a machine
without (or with) a GPU cannot reach when the notebook runs."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import types
import warnings
from collections.abc import Iterable

import pytest
import torch
from conftest import NOTEBOOK_DIR

from helpers.devices import fresh_python

# fresh_python's tests start a child Python each: marked `slow`.


class _FakeDriver:
    """Stands in for libcuda: cuDeviceGetCount returns a fixed CUresult."""

    def __init__(self, result: int):
        self.result = result

    def cuDeviceGetCount(self, _count) -> int:  # noqa: N802 (the driver's name)
        return self.result


@pytest.mark.slow
def test_fresh_python_returns_stripped_output():
    assert fresh_python("print('hello')\n\n") == "hello"


@pytest.mark.slow
def test_fresh_python_dedents_code():
    code = """
        x = 6
        print(x * 7)
    """
    assert fresh_python(code) == "42"


@pytest.mark.slow
def test_fresh_python_sets_and_unsets_variables(monkeypatch):
    monkeypatch.setenv("COURSE_GONE", "was here")
    code = "import os; print(os.getenv('COURSE_SET'), os.getenv('COURSE_GONE'))"
    env = {"COURSE_SET": "1,2", "COURSE_GONE": None}
    assert fresh_python(code, env=env) == "1,2 None"


@pytest.mark.slow
def test_fresh_python_does_not_change_this_process(monkeypatch):
    monkeypatch.delenv("COURSE_SET", raising=False)
    fresh_python("pass", env={"COURSE_SET": "x"})
    assert "COURSE_SET" not in os.environ


@pytest.mark.slow
def test_fresh_python_merges_stderr():
    out = fresh_python("import sys; print('out'); sys.stdout.flush(); "
                       "print('err', file=sys.stderr)")
    assert out.splitlines() == ["out", "err"]


@pytest.mark.slow
def test_fresh_python_raises_with_the_tail_on_failure():
    with pytest.raises(RuntimeError, match=r"exited with 3:\nboom"):
        fresh_python("import sys; print('boom'); sys.exit(3)")


@pytest.mark.slow
def test_fresh_python_times_out():
    with pytest.raises(subprocess.TimeoutExpired):
        fresh_python("import time; time.sleep(30)", timeout=0.5)


def _notebook(ctypes_module=ctypes) -> dict:
    """Run notebook 04's two definition cells in a namespace; return the namespace."""
    ns = {"ctypes": ctypes_module, "os": os, "torch": torch, "warnings": warnings,
          "Iterable": Iterable}
    path = NOTEBOOK_DIR / "04_choosing_gpus.ipynb"  # read as JSON: no nbformat needed
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        source = "".join(cell["source"])
        if source.startswith(("def cuda_started", "def set_visible_devices")):
            exec(source, ns)
    assert {"cuda_started", "set_visible_devices"} <= ns.keys()
    return ns


def _driver(result: int | None) -> types.SimpleNamespace:
    """A ctypes stand-in whose CDLL finds no driver (None) or a fake one."""
    def cdll(name):
        if result is None:
            raise OSError(name)
        return _FakeDriver(result)
    return types.SimpleNamespace(CDLL=cdll, c_int=ctypes.c_int, byref=ctypes.byref)


def test_cuda_started_is_false_without_a_driver(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    assert _notebook(_driver(None))["cuda_started"]() is False


def test_cuda_started_asks_the_driver(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    # CUDA_ERROR_NOT_INITIALIZED: cuInit not called
    assert _notebook(_driver(3))["cuda_started"]() is False
    assert _notebook(_driver(0))["cuda_started"]() is True


def test_cuda_started_when_torch_initialised(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    assert _notebook(_driver(None))["cuda_started"]() is True


def test_cuda_started_runs_on_this_machine():
    cuda_started = _notebook()["cuda_started"]
    assert isinstance(cuda_started(), bool)
    if not torch.cuda.is_available():
        assert cuda_started() is False


@pytest.mark.parametrize("devices, value", [("1,2", "1,2"), ("", ""), (3, "3"),
                                            ([1, 0], "1,0"), ((2,), "2")])
def test_set_visible_devices_formats_and_sets(monkeypatch, devices, value):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "unchanged")
    ns = _notebook()
    ns["cuda_started"] = lambda: False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ns["set_visible_devices"](devices) == value
    assert os.environ["CUDA_VISIBLE_DEVICES"] == value


def test_set_visible_devices_warns_when_too_late(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "unchanged")
    ns = _notebook()
    ns["cuda_started"] = lambda: True
    # the advice: restart first, then set it (setting it, then restarting, loses it)
    with pytest.warns(RuntimeWarning, match="after CUDA started.*restart and set it"):
        assert ns["set_visible_devices"]([0]) == "0"
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"  # still reaches child processes
