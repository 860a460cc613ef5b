"""Tests of CUDA_VISIBLE_DEVICES in helpers.devices: fresh processes, "too late"."""

from __future__ import annotations

import os
import subprocess
import warnings

import pytest
import torch

from helpers import devices as devices_mod
from helpers.devices import cuda_started, fresh_python, set_visible_devices


class _FakeDriver:
    """Stands in for libcuda: cuDeviceGetCount returns a fixed CUresult."""

    def __init__(self, result: int):
        self.result = result

    def cuDeviceGetCount(self, _count) -> int:  # noqa: N802 (the driver's name)
        return self.result


def test_fresh_python_returns_stripped_output():
    assert fresh_python("print('hello')\n\n") == "hello"


def test_fresh_python_dedents_code():
    code = """
        x = 6
        print(x * 7)
    """
    assert fresh_python(code) == "42"


def test_fresh_python_sets_and_unsets_variables(monkeypatch):
    monkeypatch.setenv("COURSE_GONE", "was here")
    code = "import os; print(os.getenv('COURSE_SET'), os.getenv('COURSE_GONE'))"
    env = {"COURSE_SET": "1,2", "COURSE_GONE": None}
    assert fresh_python(code, env=env) == "1,2 None"


def test_fresh_python_does_not_change_this_process(monkeypatch):
    monkeypatch.delenv("COURSE_SET", raising=False)
    fresh_python("pass", env={"COURSE_SET": "x"})
    assert "COURSE_SET" not in os.environ


def test_fresh_python_merges_stderr():
    out = fresh_python("import sys; print('out'); sys.stdout.flush(); "
                       "print('err', file=sys.stderr)")
    assert out.splitlines() == ["out", "err"]


def test_fresh_python_raises_with_the_tail_on_failure():
    with pytest.raises(RuntimeError, match=r"exited with 3:\nboom"):
        fresh_python("import sys; print('boom'); sys.exit(3)")


def test_fresh_python_times_out():
    with pytest.raises(subprocess.TimeoutExpired):
        fresh_python("import time; time.sleep(30)", timeout=0.5)


def test_cuda_started_is_false_without_a_driver(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(devices_mod, "_load_driver", lambda: None)
    assert cuda_started() is False


def test_cuda_started_asks_the_driver(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(devices_mod, "_load_driver", lambda: _FakeDriver(3))
    assert cuda_started() is False  # CUDA_ERROR_NOT_INITIALIZED: cuInit not called
    monkeypatch.setattr(devices_mod, "_load_driver", lambda: _FakeDriver(0))
    assert cuda_started() is True


def test_cuda_started_when_torch_initialised(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(devices_mod, "_load_driver", lambda: None)
    assert cuda_started() is True


def test_cuda_started_runs_on_this_machine():
    assert isinstance(cuda_started(), bool)
    if not torch.cuda.is_available():
        assert cuda_started() is False


def test_load_driver_returns_none_when_missing(monkeypatch):
    monkeypatch.setattr(devices_mod, "_DRIVER_NAMES", ("libno_such_driver.so.99",))
    assert devices_mod._load_driver() is None


@pytest.mark.parametrize("devices, value", [("1,2", "1,2"), ("", ""), (3, "3"),
                                            ([1, 0], "1,0"), ((2,), "2")])
def test_set_visible_devices_formats_and_sets(monkeypatch, devices, value):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "unchanged")
    monkeypatch.setattr(devices_mod, "cuda_started", lambda: False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert set_visible_devices(devices) == value
    assert os.environ["CUDA_VISIBLE_DEVICES"] == value


def test_set_visible_devices_warns_when_too_late(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "unchanged")
    monkeypatch.setattr(devices_mod, "cuda_started", lambda: True)
    # the advice: restart first, then set it (setting it, then restarting, loses it)
    with pytest.warns(RuntimeWarning, match="after CUDA started.*restart and set it"):
        assert set_visible_devices([0]) == "0"
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"  # still reaches child processes
