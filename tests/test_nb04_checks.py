"""Notebook 04's exercise checks on faked machines: a CPU run must not hide a wrong
device answer. The checks' own code is read from the notebook (as JSON: no Jupyter
stack needed), run here on pretend GPUs, and fed the solutions and the wrong answers."""

from __future__ import annotations

import ast
import builtins
import contextlib
import importlib.util
import io
import json
import os
import time
from unittest import mock

import pytest
import torch
from conftest import NOTEBOOK_DIR, ROOT

from helpers import check, num_gpus, try_gpu

CELLS = {c["id"]: "".join(c["source"]) for c in json.loads(
    (NOTEBOOK_DIR / "04_choosing_gpus.ipynb").read_text(encoding="utf-8"))["cells"]}


def _definitions(cell_id: str) -> str:
    """Return a cell's source less a solution's closing `assert check(...)`."""
    tree = ast.parse(CELLS[cell_id])
    if isinstance(tree.body[-1], ast.Assert):
        tree.body.pop()
    return ast.unparse(tree)


@pytest.fixture
def ns() -> dict:
    """The notebook's names that exercises 2 and 3 need, defined from its cells."""
    names = {"builtins": builtins, "contextlib": contextlib, "io": io, "os": os,
             "time": time, "mock": mock, "torch": torch, "check": check,
             "num_gpus": num_gpus, "try_gpu": try_gpu}
    for cell_id in ("cell-022", "cell-4d01", "cell-4d02", "cell-4d03", "cell-4d06",
                    "cell-4d04", "cell-034-a", "cell-4d05", "cell-4b03", "cell-4b06",
                    "cell-4b09"):
        exec(_definitions(cell_id), names)
    return names


def _wrong(number: int) -> list[str]:
    spec = importlib.util.spec_from_file_location(
        "wrong_04", ROOT / "tests" / "wrong_answers" / "04_choosing_gpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.WRONG[number]


@pytest.mark.parametrize("physical", [1, 2, 4, 8])
def test_visible_count_solution_is_torchs_own_rule(ns, monkeypatch, physical):
    monkeypatch.setattr(torch.cuda, "_raw_device_count_nvml", lambda: physical)
    for value in [None, "0", "2,3", "1,0", "1,7", "7,1", "0,0", "", "-1", "0,1,2,3",
                  "3,2,1,0", "1,1", "0,5,1", "2,3,2", "1,7,1", " 1, 2", "7"]:
        if value is None:
            monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
        else:
            monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
        want = torch.cuda._device_count_nvml()
        assert ns["visible_count_solution"](value, physical) == want, (value, physical)


@pytest.mark.parametrize("kernel_gpus, current", [(2, 1), (1, 0), (0, None)])
def test_device_for_rank_check_on_faked_kernels(ns, capsys, kernel_gpus, current):
    """The kernel itself has 0, 1 or 2 (pretend) GPUs: right stays right, and every
    wrong answer still gets "not yet"."""
    machine = (ns["fake_gpus"](kernel_gpus, current=current) if kernel_gpus
               else contextlib.nullcontext())
    with machine:
        assert check(ns["device_for_rank_solution"], test=ns["restores_state"])
        for answer in _wrong(3):
            mine = dict(ns)
            exec(answer, mine)
            capsys.readouterr()
            assert not check(mine["device_for_rank"], test=ns["restores_state"]), answer
            assert capsys.readouterr().out.startswith("not yet"), answer


def test_device_for_rank_wrong_answers_get_different_hints(ns, capsys):
    said = []
    for answer in _wrong(3):
        mine = dict(ns)
        exec(answer, mine)
        capsys.readouterr()
        check(mine["device_for_rank"], test=ns["restores_state"])
        said.append(capsys.readouterr().out)
    assert len(set(said)) == len(said), said


class _Clock:
    """A perf_counter that only time.sleep moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(0.0, seconds)


def test_the_pretend_gpu_tells_each_missed_part_apart(ns, monkeypatch):
    """On a clock that only the pretend GPU's waits move, so that no load blurs a
    0.4 s margin and no answer sleeps its 2 s: every wrong answer gets a reason, and
    together they name every missed part. The notebook's own check runs the same
    answers on the wall clock, under nbval, which feeds it every wrong answer."""
    clock = _Clock()
    monkeypatch.setattr(time, "perf_counter", clock.perf_counter)
    monkeypatch.setattr(time, "sleep", clock.sleep)
    assert ns["fake_problem"](ns["STARTUP_SOLUTION"]) == ""
    answers = _wrong(2)
    said = [ns["fake_problem"](ast.literal_eval(answer.split("=", 1)[1].strip()))
            for answer in answers]
    passed = [a for a, why in zip(answers, said, strict=True) if not why]
    assert not passed, f"the pretend GPU found nothing missed in: {passed}"
    for part in ("no CUDA tensor", "no synchronise", "wall clock", "import is in it"):
        assert any(part in why for why in said), (part, said)
    with ns["fake_gpu"]():  # reading a result waits for the queued work, as on a GPU
        t = torch.ones(3).cuda() * 2
        start = time.perf_counter()
        t.sum().item()
    waited = time.perf_counter() - start
    assert waited == pytest.approx(1.0), f".item() waited {waited:.2f} s, not 1 s"
    assert torch.cuda.synchronize is not ns["fake_sync"]  # the fake is gone after
    assert builtins.__import__ is __import__  # and the slow import too
