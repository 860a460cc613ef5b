"""Tests of notebooks/scripts/ddp_train.py: its parts, then real 1- and 2-rank runs."""

from __future__ import annotations

import importlib.util
import sys

import pytest
import torch
from conftest import NOTEBOOK_DIR

from helpers.launch import LaunchError, torchrun

SCRIPT = NOTEBOOK_DIR / "scripts" / "ddp_train.py"
TINY = ["--samples", "256", "--batch-size", "32", "--image-size", "8", "--width", "4",
        "--epochs", "2"]
TOLERANCE = 1e-4  # float32 sums in a different order; the notebook states the same

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="torchrun on Linux")


@pytest.fixture(scope="module")
def ddp():
    spec = importlib.util.spec_from_file_location("ddp_train", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_data_is_seeded_and_balanced(ddp):
    a, b = ddp.make_data(400, 8, seed=1), ddp.make_data(400, 8, seed=1)
    assert torch.equal(a.tensors[0], b.tensors[0])
    assert a.tensors[0].shape == (400, 1, 8, 8)
    assert set(a.tensors[1].tolist()) == {0, 1, 2, 3}


def test_net_maps_images_to_four_logits(ddp):
    assert ddp.Net(width=4)(torch.zeros(3, 1, 8, 8)).shape == (3, 4)


def test_args_have_the_documented_defaults(ddp):
    args = ddp.parse_args([])
    assert (args.fail_rank, args.accum, args.checkpoint) == (
        -1, 1, "build/ddp_checkpoint.pt")


def test_refuses_to_run_without_torchrun(ddp, monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(SystemExit, match="start me with torchrun"):
        ddp.setup("cpu")


def _train(tmp_path, name, nproc, *extra, threads=1):
    dump = tmp_path / f"{name}.pt"
    torchrun(SCRIPT, *TINY, "--device", "cpu", "--dump", dump,
             "--checkpoint", tmp_path / "ckpt.pt", *extra,
             nproc=nproc, threads=threads, echo=False, timeout=90)
    return torch.load(dump, weights_only=True)


@linux_only
def test_two_ranks_match_one_process_on_the_full_batch(tmp_path):
    one = _train(tmp_path, "one", 1)
    two = _train(tmp_path, "two", 2, "--accum", "2")  # no_sync on half the passes
    assert two["world_size"] == 2 and two["backend"] == "gloo"
    assert torch.equal(two["params"][0], two["params"][1]), "ranks drifted apart"
    diff = (two["params"][0] - one["params"][0]).abs().max().item()
    assert diff < TOLERANCE, f"2 ranks differ from 1 process by {diff:.2e}"
    assert torch.allclose(torch.tensor(one["losses"]), torch.tensor(two["losses"]),
                          atol=TOLERANCE)
    ckpt = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    assert ckpt["epoch"] == 1 and "head.weight" in ckpt["model"]


@linux_only
def test_fail_rank_is_named_by_the_launcher(tmp_path):
    with pytest.raises(LaunchError) as info:
        _train(tmp_path, "fail", 2, "--fail-rank", "1")
    assert info.value.rank == 1
    assert "RuntimeError: simulated crash on rank 1 at step 2" in str(info.value)
