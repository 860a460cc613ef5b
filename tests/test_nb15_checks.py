"""Notebook 15's exercise checks on answers the wrong-answer run cannot show: right
answers in another type or in another correct form must get "right", and the DDP
stand-in must record the syncs real DDP does for the same learner code."""

from __future__ import annotations

import contextlib
import io
import json
import sys

import numpy as np
import pytest
import torch
from conftest import NOTEBOOK_DIR

from helpers import check
from helpers.exercises import digest

NOTEBOOK = NOTEBOOK_DIR / "15_transformer.ipynb"
CELLS = ("c1c33b11", "268173c9", "c14235c4", "cell-045", "dffd8aba", "5e1f0c2a",
         "3b30dc1b")


@pytest.fixture(scope="module")
def ns():
    """The notebook's check cells, run in a namespace of their own."""
    if str(NOTEBOOK_DIR / "scripts") not in sys.path:
        sys.path.insert(0, str(NOTEBOOK_DIR / "scripts"))
    import gpt

    cells = {c["id"]: "".join(c["source"])
             for c in json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]}
    space = {"torch": torch, "gpt": gpt, "contextlib": contextlib, "digest": digest,
             "data": gpt.corpus(20_000), "T": gpt.Config().block}
    for cell_id in CELLS:
        exec(cells[cell_id], space)
    return space


def said(answer, test) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        check(answer, test=test)
    return out.getvalue().strip()


EX1, EX2 = 854_770_176, 41.3  # what the hidden solutions compute


@pytest.mark.parametrize("answer", [EX1, float(EX1), np.int64(EX1), torch.tensor(EX1)])
def test_exercise_1_right_in_any_type(ns, answer):
    test = ns["hinted"]("adf0bb3cb971", ns["HINTS_1"], "")
    assert said(answer, test) == "right"


def test_exercise_2_right_in_any_type_and_rounding_hinted(ns):
    test = ns["hinted"]("b7e09de9043d", ns["HINTS_2"], "", decimals=1)
    assert said(EX2, test) == "right" and said(np.float64(EX2), test) == "right"
    for unrounded in (41.318176355915064, 41.32):
        assert "not rounded" in said(unrounded, test), said(unrounded, test)


ACCUMULATE = {  # learner code for exercise 3, by what it is
    "no_sync": """
def accumulate(model, x, y, accum):
    for i, (xm, ym) in enumerate(zip(x.tensor_split(accum), y.tensor_split(accum))):
        with model.no_sync() if i < accum - 1 else contextlib.nullcontext():
            (gpt.loss_fn(model(xm), ym) * len(xm) / len(x)).backward()""",
    "nanogpt": """
def accumulate(model, x, y, accum):  # nanoGPT's way: DDP's flag, set by hand
    for i, (xm, ym) in enumerate(zip(x.tensor_split(accum), y.tensor_split(accum))):
        model.require_backward_grad_sync = i == accum - 1
        (gpt.loss_fn(model(xm), ym) * len(xm) / len(x)).backward()""",
    "nested": """
def accumulate(model, x, y, accum):  # the inner no_sync restores False: no sync
    pieces = list(zip(x.tensor_split(accum), y.tensor_split(accum)))
    with model.no_sync():
        for i, (xm, ym) in enumerate(pieces):
            if i == accum - 1:
                with model.no_sync():
                    pass
            (gpt.loss_fn(model(xm), ym) * len(xm) / len(x)).backward()""",
    "zeroed": """
def accumulate(model, x, y, accum):
    for i, (xm, ym) in enumerate(zip(x.tensor_split(accum), y.tensor_split(accum))):
        model.zero_grad()
        with model.no_sync() if i < accum - 1 else contextlib.nullcontext():
            (gpt.loss_fn(model(xm), ym) * len(xm) / len(x)).backward()""",
}


def _accumulate(ns, kind: str):
    space = dict(ns)
    exec(ACCUMULATE[kind], space)
    return space["accumulate"]


@pytest.mark.parametrize("kind, verdict", [
    ("no_sync", "right"), ("nanogpt", "right"), ("nested", "not yet: syncs"),
    ("zeroed", "not yet: .grad holds the last micro-batch's share alone")])
def test_exercise_3_verdicts(ns, kind, verdict):
    got = said(_accumulate(ns, kind), ns["test_accumulate"])
    assert got.startswith(verdict), got


@pytest.mark.parametrize("kind", ["no_sync", "nanogpt", "nested"])
def test_stand_in_syncs_as_ddp_does(ns, group, kind):
    """Per micro-batch, SyncCounter says "sync" exactly when real DDP all-reduces."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    gpt_ddp = pytest.importorskip("gpt_ddp")
    cfg = ns["gpt"].Config(layers=1, block=16)
    x, y = ns["gpt"].batch(ns["data"], 0, 7, cfg.block)
    fn = _accumulate(ns, kind)
    stand_in = ns["SyncCounter"](ns["gpt"].GPT(cfg).double())
    fn(stand_in, x, y, 3)
    ddp = DDP(ns["gpt"].GPT(cfg).double())
    counter, calls = {"calls": 0, "elements": 0}, []
    ddp.register_comm_hook(counter, gpt_ddp.counting_hook)
    forward = ddp.forward

    def counted(*args):  # the hook calls so far, before each forward
        calls.append(counter["calls"])
        return forward(*args)

    ddp.forward = counted
    fn(ddp, x, y, 3)
    calls.append(counter["calls"])
    synced = [b > a for a, b in zip(calls[:-1], calls[1:], strict=True)]
    assert synced == [s for s, _, _ in stand_in.syncs], (kind, synced, stand_in.syncs)
