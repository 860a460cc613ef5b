"""Notebook 09's exercise checks accept right answers of every form and give each
mistake its own hint (the wrong answers themselves run under nbval,
tests/wrong_answers/09_distributed_data_parallel.py)."""

from __future__ import annotations

import math
import sys

import pytest
from conftest import NOTEBOOK_DIR, cell_sources, said

PATH = NOTEBOOK_DIR / "09_distributed_data_parallel.ipynb"
SETUP = """\
import math
import torch
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler
from helpers import check
from helpers.exercises import digest
SEED = 0
"""


@pytest.fixture(scope="module")
def ns():
    """The notebook's hidden check cell, run after the names it needs."""
    sys.path.insert(0, str(NOTEBOOK_DIR / "scripts"))
    cells = cell_sources(PATH)
    space: dict = {}
    exec(SETUP, space)
    exec(cells["cell-a70c10-h"], space)
    return space


HEAD = "def rank_loader(data, batch, rank, world, epoch, seed=SEED):\n"
BY_HAND = HEAD + """\
    g = torch.Generator().manual_seed(seed + epoch)
    order = torch.randperm(len(data), generator=g).tolist()
    order += order[:-len(data) % world]  # padded as DistributedSampler pads
    return DataLoader(order[rank::world], batch_size=batch // world)
"""
SEEDED = HEAD + """\
    sampler = DistributedSampler(data, world, rank, seed=seed + epoch)
    return DataLoader(data, batch_size=batch // world, sampler=sampler)
"""
NO_PADDING = HEAD + """\
    g = torch.Generator().manual_seed(seed + epoch)
    order = torch.randperm(len(data), generator=g).tolist()
    return DataLoader(order[rank::world], batch_size=batch // world)
"""


@pytest.mark.parametrize("answer", [BY_HAND, SEEDED])
def test_rank_loader_accepts_other_right_methods(ns, answer):
    assert said(ns, answer, "check(rank_loader, test=global_batches_match)") == "right"


def test_dealing_by_hand_without_padding_fails_at_sizes_that_do_not_divide(ns):
    out = said(ns, NO_PADDING, "check(rank_loader, test=global_batches_match)")
    assert out.startswith("not yet") and "pads the shares" in out, out


def test_padding_a_whole_world_fails_where_the_ranks_divide_the_data(ns):
    answer = NO_PADDING.replace("    return", "    order += order[:world - len(data) % "
                                "world]\n    return")
    out = said(ns, answer, "check(rank_loader, test=global_batches_match)")
    assert out.startswith("not yet") and "next multiple" in out, out


@pytest.mark.parametrize("answer", ["(60, 35, 10)", "[60.0, 35, 10]",
                                    "(torch.tensor(60), 35, 10)"])
def test_counts_accept_any_form(ns, answer):
    assert said(ns, f"answer = {answer}", "check(answer, test=right_counts)") == "right"


def test_the_global_shortcut_now_lands_on_a_wrong_number(ns):
    """ceil(2048 / 60) steps is right by nested ceilings; the last step's samples are
    where the sampler's padding shows, and 2048 - 34 * 60 misses it."""
    out = said(ns, f"answer = (60, {math.ceil(2048 / 60)}, {2048 - 34 * 60})",
               "check(answer, test=right_counts)")
    assert out.startswith("not yet") and "pads" in out, out


@pytest.mark.parametrize(("value", "why"), [("1", "divided by 4"), ("2", "√4"),
                                             ("0.25", "grows"), ("16", "squared"),
                                             ("5", "compare their sum")])
def test_unscaled_factor_hints_differ_by_mistake(ns, value, why):
    out = said(ns, f"answer = {value}", "check(answer, test=matches_the_measurement)")
    assert out.startswith("not yet") and why in out, out
