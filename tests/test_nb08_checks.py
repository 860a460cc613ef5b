"""Notebook 08's exercise-2 check: right answers of other shapes stay right, and the
replica checks say what is wrong. The cells are read from the notebook (as JSON) and
run here."""

from __future__ import annotations

import ast
import copy
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest
import torch
import torch.nn.functional as F
from conftest import NOTEBOOK_DIR
from torch import nn

from helpers import check
from helpers.models import MLP, diabetes_split

CELLS = {c["id"]: "".join(c["source"]) for c in json.loads(
    (NOTEBOOK_DIR / "08_data_parallel.ipynb").read_text(encoding="utf-8"))["cells"]}


def _definitions(cell_id: str) -> str:
    """Return a cell's definitions only (no top-level calls or asserts)."""
    tree = ast.parse(CELLS[cell_id])
    tree.body = [n for n in tree.body if isinstance(
        n, (ast.FunctionDef, ast.ClassDef, ast.Assign, ast.Import, ast.ImportFrom))]
    return ast.unparse(tree)


@pytest.fixture(scope="module")
def ns() -> dict:
    X_train, _, y_train, _ = diabetes_split()
    names = {"copy": copy, "threading": threading,
             "ThreadPoolExecutor": ThreadPoolExecutor, "contextmanager": contextmanager,
             "torch": torch, "nn": nn, "F": F,
             "check": check, "MLP": MLP, "X_train": X_train, "y_train": y_train}
    for cell_id in ("cell-010", "cell-013", "cell-013-b", "cell-022", "cell-024",
                    "cell-6b04-t", "cell-8d02", "cell-8d03", "cell-8d04", "cell-6b05",
                    "cell-6b06"):
        exec(_definitions(cell_id), names)
    return names


RIGHT = {
    "the solution": None,
    "a deep copy made inside each call":
        "def broadcast_replicas(net, n):\n"
        "    def make():\n"
        "        params = {k: p.clone() for k, p in net.named_parameters()}\n"
        "        call = torch.func.functional_call\n"
        "        return lambda xb: call(copy.deepcopy(net), params, (xb,))\n"
        "    return [make() for _ in range(n)]",
    "clones set into each copy's _parameters, as replicate() does":
        "def broadcast_replicas(net, n):\n"
        "    replicas = []\n"
        "    for _ in range(n):\n"
        "        r = copy.deepcopy(net)\n"
        "        for name, p in net.named_parameters():\n"
        "            owner, _, leaf = name.rpartition('.')\n"
        "            module = r.get_submodule(owner) if owner else r\n"
        "            module._parameters[leaf] = p.clone()\n"
        "        replicas.append(r)\n"
        "    return replicas",
}


@pytest.mark.parametrize("name", list(RIGHT))
def test_right_answers_are_right(ns, name, capsys):
    mine = dict(ns)
    if RIGHT[name] is None:
        fn = ns["broadcast_replicas_solution"]
    else:
        exec(RIGHT[name], mine)
        fn = mine["broadcast_replicas"]
    assert check(fn, test=ns["matches_full_batch"]), capsys.readouterr().out


def test_running_net_itself_is_refused_and_net_is_left_alone(ns, capsys):
    mine = dict(ns)
    exec("def broadcast_replicas(net, n):\n"
         "    params = {k: p.clone() for k, p in net.named_parameters()}\n"
         "    call = torch.func.functional_call\n"
         "    return [lambda xb: call(net, params, (xb,))] * n", mine)
    assert not check(mine["broadcast_replicas"], test=ns["matches_full_batch"])
    assert "ran `net` itself" in capsys.readouterr().out
    net = MLP()
    with ns["watch_replicas"](net):
        pass
    assert "forward" not in vars(net)  # nothing of the watch is left on net
