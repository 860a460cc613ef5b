"""Notebook 06's sync finders, run from the notebook's own cells: they must see syncs on
a device other than the CPU (the meta device stands in for an accelerator), ignore
another device's operators, and catch the host reads that reach no CPU operator."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import NOTEBOOK_DIR

CELLS = ("cell-sync-mode", "cell-sync-2", "cell-sync-reads", "cell-ex4-test",
         "cell-ex4-test-b", "cell-ex4-sol")


@pytest.fixture(scope="module")
def nb() -> dict:
    """Run 06's finder and exercise-4 cells in a namespace; return the namespace."""
    path = NOTEBOOK_DIR / "06_where_time_goes.ipynb"
    sources = {c.get("id"): "".join(c["source"])
               for c in json.loads(path.read_text(encoding="utf-8"))["cells"]}
    ns = {"torch": torch, "device": torch.device("cpu"), "ys": torch.ones(3, 1),
          "check": lambda answer, test, solution=False: test(answer) or True}
    for cell in CELLS:
        exec(sources[cell], ns)
    return ns


def _found(nb, dev, fn):
    """Return what FindSyncs(dev) and FindHostReads record while `fn` runs."""
    with nb["FindSyncs"](dev) as finder, nb["FindHostReads"]() as reads:
        try:
            fn()
        except (NotImplementedError, RuntimeError):  # meta tensors hold no values
            pass
    return finder.found, reads.found


@pytest.mark.parametrize("op, kind", [
    (lambda x, m: x[m], "a boolean-mask index"),
    (lambda x, m: m.nonzero(), "a size that depends on values"),
    (lambda x, m: torch.unique(m), "a size that depends on values"),
    (lambda x, m: x.repeat_interleave(m.long()), "a size that depends on values"),
    (lambda x, m: torch.equal(x, x), "a bool read to Python"),
    (lambda x, m: torch.bincount(m.long()), "a size that depends on values"),
])
def test_find_syncs_sees_a_fake_accelerators_syncs(nb, op, kind):
    x = torch.empty(8, device="meta")
    m = torch.empty(8, dtype=torch.bool, device="meta")
    assert kind in _found(nb, "meta", lambda: op(x, m))[0]


def test_find_syncs_ignores_another_devices_operators(nb):
    x = torch.arange(8.0)
    found, _ = _found(nb, "meta", lambda: x[x > 3])
    assert found == [], found


def test_repeat_interleave_with_its_output_size_does_not_sync(nb):
    x, r = torch.arange(4.0), torch.tensor([1, 0, 2, 1])
    found, _ = _found(nb, "cpu", lambda: x.repeat_interleave(r, output_size=4))
    assert found == [], found


@pytest.mark.parametrize("read", ["tolist", "numpy", "cpu", "item", "__repr__"])
def test_find_host_reads_sees_reads_that_reach_no_cpu_operator(nb, read):
    x = torch.ones(())
    syncs, reads = _found(nb, "cpu", lambda: getattr(x, read)())
    assert f".{read}()" in reads, reads
    if read != "item":  # .item() reaches _local_scalar_dense; the others no operator
        assert syncs == [], syncs


@pytest.mark.parametrize("read", [
    lambda x: x.to("cpu"), lambda x: x.to(torch.device("cpu"), non_blocking=True),
    lambda x: x.to(device="cpu"), lambda x: x.__array__()])
def test_find_host_reads_sees_copies_back_that_a_cpu_run_makes_no_op(nb, read):
    syncs, reads = _found(nb, "cpu", lambda: read(torch.ones(3)))
    assert reads and syncs == [], (reads, syncs)


def test_find_host_reads_ignores_a_move_to_another_device_or_dtype(nb):
    _, reads = _found(nb, "cpu", lambda: torch.ones(3).to("meta").to(torch.float64))
    assert reads == [], reads


def test_the_exercise_check_takes_the_solution_and_rejects_a_host_read(nb):
    nb["no_sync"](nb["masked_loss_no_sync_solution"])

    def tolist(out, y, keep):
        err = (out - y).square().squeeze(-1)
        return (err * keep).sum() / sum(keep.tolist())
    with pytest.raises(AssertionError, match="tolist"):
        nb["no_sync"](tolist)
