"""Tests of notebooks/scripts/fsdp_train.py and its siblings: their parts, then one
real launch."""

from __future__ import annotations

import json
import sys
import warnings

import pytest
import torch
import torch.distributed.checkpoint as dcp
from conftest import NOTEBOOK_DIR, foreign_imports, free_port, load_script

from helpers.launch import torchrun

SCRIPT = NOTEBOOK_DIR / "scripts" / "fsdp_train.py"
SIBLINGS = ("fsdp_model", "fsdp_variants", "fsdp_checkpoint", "tp_mlp")  # it imports
sys.path.insert(0, str(SCRIPT.parent))  # as torchrun does for the script itself
TINY = ["--dim", "32", "--depth", "2", "--batch-size", "8", "--device", "cpu"]
MODEL = load_script(SCRIPT.with_name("fsdp_model.py"))  # the model and byte counts
TOLERANCE = MODEL.TOLERANCE  # float64: the notebook asserts the same constants
TP_TOLERANCE = load_script(SCRIPT.with_name("tp_mlp.py")).TOLERANCE

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="torchrun on Linux")


@pytest.fixture(scope="module")
def fsdp():
    return load_script(SCRIPT)


@pytest.fixture(scope="module")
def model():
    return MODEL


def test_imports_only_torch_the_standard_library_and_its_siblings():
    for path in [SCRIPT, *(SCRIPT.with_name(f"{name}.py") for name in SIBLINGS)]:
        others = foreign_imports(path, allowed=SIBLINGS)
        assert not others, f"{path.name} imports beyond torch and the stdlib: {others}"


def test_net_maps_features_to_eight_logits(model):
    assert model.Net(dim=32, depth=2)(torch.zeros(3, 32)).shape == (3, 8)


def test_refuses_to_run_without_torchrun(fsdp, monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    with pytest.raises(SystemExit, match="start me with torchrun"):
        fsdp.setup("cpu")


def test_memory_counts_16_bytes_per_parameter_with_adam(model):
    net = model.Net(dim=32, depth=2)
    opt = torch.optim.Adam(net.parameters())
    net(torch.randn(4, 32)).sum().backward()
    opt.step()
    mem = model.memory(net, opt)
    n = sum(p.numel() for p in net.parameters())
    steps = 4 * len(opt.state)  # Adam's step counters: one float32 scalar each
    assert (mem["params"], mem["grads"], mem["optimizer"]) == (4 * n, 4 * n,
                                                               8 * n + steps)


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    """One launch, two worlds: 2 ranks compare, save and try TP; 1 rank reloads."""
    out = tmp_path_factory.mktemp("fsdp")
    torchrun(SCRIPT, *TINY, "--out", out, "--steps", 2, "--timed", 1, "--worlds",
             "2,1", "--tp", "--variants", "--save-checkpoint", out / "ckpt", nproc=2,
             echo=False, timeout=120)
    return out, json.loads((out / "fsdp_w2.json").read_text())


def test_shards_are_half_size(two_ranks):
    _, result = two_ranks
    shard = result["shard"]
    assert shard["placements"] == "(Shard(dim=0),)"
    assert shard["local_shapes"] == [[shard["shape"][0] // 2, shard["shape"][1]]] * 2
    f32 = result["float32"]
    for part in ("params", "grads"):
        assert f32["fsdp"]["memory"][part] * 2 == f32["ddp"]["memory"][part], part
    ratio = sum(f32["fsdp"]["memory"].values()) / sum(f32["ddp"]["memory"].values())
    assert 0.5 <= ratio < 0.501, f"FSDP2/DDP bytes {ratio:.4f}, expected 0.5"


def test_fsdp_equals_one_process_and_ddp(two_ranks):
    _, result = two_ranks
    r = result["float64"]["fsdp"]
    assert r["max_diff_single"] <= TOLERANCE, r
    assert r["max_diff_ddp"] <= TOLERANCE, r
    assert result["float32"]["fsdp"]["max_diff_single"] <= 1e-5, result["float32"]


def test_bf16_policy_gathers_half_the_bytes(two_ranks):
    """Counted from the all-gathers' own outputs: a cast after the gather would not
    halve them, though the full weights it leaves would be bf16 all the same."""
    _, result = two_ranks
    f32 = result["float32"]
    fp32, bf16 = (f32[k]["gathered_forward"] for k in ("fsdp", "fsdp_bf16"))
    assert fp32 == 2 * bf16 > 0, f"all-gathered float32 {fp32} B, bf16 {bf16} B"
    assert f32["fsdp_keep"]["gathered_forward"] == fp32, f32["fsdp_keep"]
    assert f32["ddp"]["gathered_forward"] == 0, "DDP gathers nothing"


def test_a_world_of_one_holds_everything(two_ranks):
    out, _ = two_ranks
    one = json.loads((out / "fsdp_w1.json").read_text())
    assert one["shard"]["local_shapes"] == [one["shard"]["shape"]], one["shard"]
    mem = one["float32"]
    assert mem["fsdp"]["memory"] == mem["ddp"]["memory"], mem


def test_checkpoint_reloads_under_another_world_size(two_ranks, model):
    out, _ = two_ranks
    saved = torch.load(out / "saved_w2.pt", weights_only=True)
    loaded = torch.load(out / "loaded_w1.pt", weights_only=True)
    assert saved.keys() == loaded.keys()
    assert all(torch.equal(saved[k], loaded[k]) for k in saved)
    plain = model.Net(dim=32, depth=2)  # no process group at all
    state = {"model": plain.state_dict()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        dcp.load(state, checkpoint_id=out / "ckpt", no_dist=True)
    assert all(torch.equal(state["model"][k], saved[k]) for k in saved)


def test_tensor_parallel_blocks_equal_the_unsplit_ones(two_ranks):
    out, _ = two_ranks
    result = json.loads((out / "tp.json").read_text())
    assert max(result["out_diff"], result["grad_diff"]) <= TP_TOLERANCE, result
    blocks = result["blocks"]  # one all-reduce per block each way
    assert result["forward"] == {"all_reduce": blocks} == result["backward"], result
    assert result["shapes"]["up.weight"] == [[128, 32], [64, 32]], result["shapes"]
    assert result["shapes"]["down.weight"] == [[32, 128], [32, 64]], result["shapes"]
    assert result["forward_sizes"] == [8 * 32] * blocks, result  # batch x dim, measured


def test_one_step_reloads_in_a_launch_of_its_own(two_ranks, fsdp, monkeypatch):
    """The path of 2-3 GPU machines: a second launch measures and reloads only (run
    here in this process as a world of one, to save the start of another torch)."""
    out, _ = two_ranks
    again = out / "again"
    env = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    fsdp.main([*TINY, "--out", str(again), "--one-step", "--load-checkpoint",
               str(out / "ckpt"), "--threads", str(torch.get_num_threads())])
    one = json.loads((again / "fsdp_w1.json").read_text())
    assert set(one) >= {"float32", "shard"} and "float64" not in one, sorted(one)
    assert one["float32"]["fsdp"]["step_s"] is None, "--one-step times nothing"
    saved = torch.load(out / "saved_w2.pt", weights_only=True)
    loaded = torch.load(again / "loaded_w1.pt", weights_only=True)
    assert all(torch.equal(saved[k], loaded[k]) for k in saved)
