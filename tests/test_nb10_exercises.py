"""Notebook 10's exercise checks accept right answers of every form, DDP's own order
included, and name the mistake in wrong ones (the wrong answers themselves run under
nbval, tests/wrong_answers/10_ddp_in_practice.py)."""

from __future__ import annotations

import sys

import pytest
from conftest import NOTEBOOK_DIR, cell_sources, said

PATH = NOTEBOOK_DIR / "10_ddp_in_practice.ipynb"
CHECKS = ["cell-5b60d9-h", "cell-5b60d9-t", "cell-5263fd-t", "cell-1a4d62"]
SETUP = """\
import torch
import torch.distributed as dist
from torch.utils.data import TensorDataset
from torch.utils.data.distributed import DistributedSampler
from helpers import check
from helpers.exercises import digest
import ddp_by_hand
from common import Net, make_data
SIZE = 12
torch.manual_seed(0)
net = Net(16)
"""


@pytest.fixture(scope="module")
def ns():
    """The notebook's check cells, run after the names they need."""
    sys.path.insert(0, str(NOTEBOOK_DIR / "scripts"))
    cells = cell_sources(PATH)
    space: dict = {}
    exec(SETUP, space)
    for cid in CHECKS:
        exec(cells[cid].split("\ncheck(")[0], space)  # the exercise's own check call
    return space


DDP_ORDER = """\
def average_in_one_bucket(model, world, all_reduce=dist.all_reduce):
    grads = [p.grad for p in model.parameters()][::-1]  # DDP's buckets: reversed
    bucket = torch.cat([g.flatten() for g in grads]) / world  # divided first, as DDP
    all_reduce(bucket)
    for g, part in zip(grads, bucket.split([g.numel() for g in grads])):
        g.copy_(part.view_as(g))
"""

AS_VIEWS = """\
def average_in_one_bucket(model, world, all_reduce=dist.all_reduce):
    params = list(model.parameters())
    bucket = torch.cat([p.grad.flatten() for p in params])
    all_reduce(bucket)
    bucket.div_(world)
    for p, part in zip(params, bucket.split([p.numel() for p in params])):
        p.grad = part.view_as(p)  # gradient_as_bucket_view, by hand
"""

PADDED_TAIL = """\
def local_counts(model, data, sampler):
    idx, world = list(sampler), sampler.num_replicas
    padded = len(data) % world and sampler.rank >= len(data) % world
    idx = idx[:len(idx) - padded]  # only ranks past the data's end hold a repeat
    x, y = data[torch.tensor(idx)]
    with torch.no_grad():
        return [(model(x).argmax(1) == y).sum().item(), len(idx)]  # a list
"""


ASYNC_AVG = """\
def average_in_one_bucket(model, world, all_reduce=dist.all_reduce):
    grads = [p.grad for p in model.parameters()]
    bucket = torch.cat([g.flatten() for g in grads])
    all_reduce(bucket, op=dist.ReduceOp.AVG, async_op=True).wait()  # nccl's way
    for g, part in zip(grads, bucket.split([g.numel() for g in grads])):
        g.copy_(part.view_as(g))
"""

WHOLE_SHARE_RIGHT = """\
def local_counts(model, data, sampler):
    idx = torch.tensor(list(sampler))
    keep = sampler.rank + sampler.num_replicas * torch.arange(len(idx)) < len(data)
    x, y = data[idx]
    with torch.no_grad():
        right = (model(x).argmax(1) == y).sum()  # the repeats' answers counted too
    return torch.stack([right, keep.sum()])
"""


@pytest.mark.parametrize("answer", [DDP_ORDER, AS_VIEWS, ASYNC_AVG])
def test_one_bucket_accepts_any_right_order(ns, answer):
    assert said(ns, answer, "check(average_in_one_bucket, test=averages_in_one_bucket)"
                ) == "right"


def test_one_bucket_names_a_hard_coded_world(ns):
    answer = DDP_ORDER.replace("/ world", "/ 2")
    out = said(ns, answer, "check(average_in_one_bucket, test=averages_in_one_bucket)")
    assert out.startswith("not yet") and "sum / 2" in out and "3 here" in out, out


def test_counts_accept_a_list_from_another_method(ns):
    assert said(ns, PADDED_TAIL, "check(local_counts, test=summed_over_ranks)"
                ) == "right"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_counting_a_repeat_fails_whatever_the_trained_model(ns, seed):
    """The check's own model is right on the padded samples, so counting a repeat's
    answer always shows, whichever weights notebook 10's run trained."""
    torch = ns["torch"]
    torch.manual_seed(seed)
    space = {**ns, "net": ns["Net"](16)}
    out = said(space, WHOLE_SHARE_RIGHT, "check(local_counts, test=summed_over_ranks)")
    assert out.startswith("not yet") and "each once" in out, out
    assert said(space, PADDED_TAIL, "check(local_counts, test=summed_over_ranks)"
                ) == "right"


@pytest.mark.parametrize("value", ["1", "1.0", "'1.0'", "torch.tensor(1.0)",
                                   "torch.tensor(1.0, dtype=torch.bfloat16)"])
def test_bf16_accepts_the_value_in_any_form(ns, value):
    assert said(ns, f"answer = {value}", "check(answer, test=matches_the_measurement)"
                ) == "right"


@pytest.mark.parametrize(("value", "why"), [("2.0", "exact arithmetic"),
                                             ("1.99", "loses only a little"),
                                             ("1.5", "nearest bfloat16")])
def test_bf16_hints_differ_by_mistake(ns, value, why):
    out = said(ns, f"answer = {value}", "check(answer, test=matches_the_measurement)")
    assert out.startswith("not yet") and why in out, out
