"""Tests of notebooks/scripts/ddp_train.py: its parts, then real 1- to 3-rank runs."""

from __future__ import annotations

import math
import statistics
import sys

import pytest
import torch
from conftest import NOTEBOOK_DIR, load_script
from torch.utils.data import DataLoader

from helpers.launch import LaunchError, free_port, torchrun

SCRIPT = NOTEBOOK_DIR / "scripts" / "ddp_train.py"
TINY = ["--samples", "256", "--batch-size", "32", "--image-size", "8", "--width", "4",
        "--epochs", "2"]
TOLERANCE = 1e-4  # float32 sums in a different order; the notebook states the same

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="torchrun on Linux")


@pytest.fixture(scope="module")
def ddp():
    return load_script(SCRIPT)


@pytest.fixture
def group():
    """A one-process gloo group in this process, left again afterwards."""
    dist = torch.distributed
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}",
                            rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_imports_only_torch_and_the_standard_library():
    lines = SCRIPT.read_text().splitlines()
    imported = {line.split()[1].split(".")[0] for line in lines
                if line.startswith(("import ", "from "))}
    others = imported - {"torch"} - set(sys.stdlib_module_names)
    assert not others, f"imports beyond torch and the standard library: {others}"


def test_data_is_seeded_and_balanced(ddp):
    a, b = ddp.make_data(400, 8, seed=1), ddp.make_data(400, 8, seed=1)
    assert torch.equal(a.tensors[0], b.tensors[0])
    assert a.tensors[0].shape == (400, 1, 8, 8)
    assert set(a.tensors[1].tolist()) == {0, 1, 2, 3}


def test_net_maps_images_to_four_logits(ddp):
    assert ddp.Net(width=4)(torch.zeros(3, 1, 8, 8)).shape == (3, 4)


def test_args_have_the_documented_defaults(ddp):
    args = ddp.parse_args([])
    assert (args.fail_rank, args.accum, args.checkpoint, args.tf32) == (
        -1, 1, "build/ddp_checkpoint.pt", "off")


def test_refuses_to_run_without_torchrun(ddp, monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(SystemExit, match="start me with torchrun"):
        ddp.setup("cpu")


@pytest.mark.parametrize("world", range(1, 9))
@pytest.mark.parametrize("accum", [1, 3])
def test_any_world_size_gets_a_batch(ddp, world, accum):
    micro, note = ddp.split_batch(64, world, accum)
    used = micro * world * accum
    assert micro >= 1 and used <= max(64, world * accum), f"{micro=} {used=}"
    assert (note == "") == (used == 64), note
    if note:
        assert f"using {used}" in note


def test_accum_does_not_leak_gradients_across_epochs(ddp, group):
    """7 micro-batches with --accum 3: steps of 3, 3 and 1, and nothing left over."""
    data = ddp.make_data(28, 8, seed=0)
    loader = DataLoader(data, batch_size=4)
    torch.manual_seed(0)
    net = ddp.Net(4)
    plain = ddp.Net(4)
    plain.load_state_dict(net.state_dict())
    model = torch.nn.parallel.DistributedDataParallel(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    _, step_ms = ddp.train_epoch(model, loader, opt, 3, torch.device("cpu"))
    assert len(step_ms) == 3, f"{len(step_ms)} optimizer steps, expected 3"
    leaked = [n for n, p in net.named_parameters() if p.grad is not None]
    assert not leaked, f"gradients left for the next epoch in {leaked}"
    # The same steps by hand: each step averages the losses of its own micro-batches.
    plain_opt = torch.optim.SGD(plain.parameters(), lr=0.1)
    batches = list(loader)
    for group_of in (batches[0:3], batches[3:6], batches[6:7]):
        for x, y in group_of:
            (torch.nn.functional.cross_entropy(plain(x), y) / len(group_of)).backward()
        plain_opt.step()
        plain_opt.zero_grad()
    diff = (ddp.flat_params(net) - ddp.flat_params(plain)).abs().max().item()
    assert diff < 1e-6, f"DDP accumulation differs from the manual steps by {diff:.1e}"


def _train(tmp_path, name, nproc, *extra, threads=1, work=TINY):
    dump = tmp_path / f"{name}.pt"
    result = torchrun(SCRIPT, *work, "--dump", dump, "--checkpoint",
                      tmp_path / "ckpt.pt", *extra, nproc=nproc, threads=threads,
                      echo=False, timeout=180)
    return torch.load(dump, weights_only=True), result


@linux_only
def test_two_ranks_match_one_process_on_the_full_batch(tmp_path):
    one, _ = _train(tmp_path, "one", 1, "--device", "cpu")
    two, _ = _train(tmp_path, "two", 2, "--device", "cpu", "--accum", "2")  # no_sync
    assert two["world_size"] == 2 and two["backend"] == "gloo"
    assert torch.equal(two["params"][0], two["params"][1]), "ranks drifted apart"
    diff = (two["params"][0] - one["params"][0]).abs().max().item()
    assert diff < TOLERANCE, f"2 ranks differ from 1 process by {diff:.2e}"
    pairs = zip(one["losses"], two["losses"], strict=True)
    loss_diff = max(abs(a - b) for a, b in pairs)
    assert loss_diff < TOLERANCE, f"losses differ by {loss_diff:.2e}"
    ckpt = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    assert ckpt["epoch"] == 1 and "head.weight" in ckpt["model"]


@linux_only
def test_three_ranks_run_with_the_default_options(tmp_path):
    """64 does not divide by 3: the script rounds to 63 with a note, never refuses."""
    res, launch = _train(tmp_path, "three", 3, work=[])
    assert res["world_size"] == 3
    assert all(torch.equal(p, res["params"][0]) for p in res["params"]), "drifted"
    note = [line for line in launch.lines(0) if line.startswith("note:")]
    assert note and "using 63" in note[0], f"rank 0 printed {launch.lines(0)[:2]}"
    # 2048 samples: 683 per rank (one padded), 33 micro-batches of 21: 33 steps
    # per epoch, 2 epochs, the first 2 steps not timed.
    assert res["steps"] == len(res["step_ms"]) == 2 * 33 - 2, res["steps"]
    assert res["median_ms"] == statistics.median(res["step_ms"]), "not the median"
    assert math.isclose(res["seconds"], sum(res["step_ms"]) / 1e3)


@linux_only
def test_fail_rank_is_named_by_the_launcher(tmp_path):
    with pytest.raises(LaunchError) as info:
        _train(tmp_path, "fail", 2, "--device", "cpu", "--fail-rank", "1")
    assert info.value.rank == 1
    assert "RuntimeError: simulated crash on rank 1 at step 2" in str(info.value)
