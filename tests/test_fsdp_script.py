"""Tests of notebook 14's scripts (fsdp_*.py): their parts, then one real launch of
fsdp_lessons.py, which runs the four lessons as the notebook does."""

from __future__ import annotations

import importlib
import sys
import warnings

import pytest
import torch
import torch.distributed.checkpoint as dcp
from conftest import NOTEBOOK_DIR, foreign_imports

from helpers.launch import free_port, torchrun

SCRIPTS = NOTEBOOK_DIR / "scripts"
RUNNER = SCRIPTS / "fsdp_lessons.py"
LESSONS = ("fsdp_train", "fsdp_variants", "fsdp_checkpoint", "fsdp_tp_mlp")
FAMILY = ("common", "fsdp_model", *LESSONS)  # what the family may import
TINY = ["--dim", "32", "--depth", "2", "--batch-size", "8", "--device", "cpu"]
sys.path.insert(0, str(SCRIPTS))  # as torchrun does: the scripts import their family
MODEL, COMMON, TRAIN, VARIANTS, TP, RUN = (importlib.import_module(name) for name in (
    "fsdp_model", "common", "fsdp_train", "fsdp_variants", "fsdp_tp_mlp",
    "fsdp_lessons"))  # one module each, as in a launch: records keep their classes
TOLERANCE = MODEL.TOLERANCE  # float64: the notebook asserts the same constants

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="torchrun on Linux")


def test_imports_only_torch_the_standard_library_and_its_family():
    for name in ("fsdp_lessons", "fsdp_model", *LESSONS):
        others = foreign_imports(SCRIPTS / f"{name}.py", allowed=FAMILY)
        assert not others, f"{name}.py imports beyond torch and its family: {others}"


def test_net_maps_features_to_eight_logits():
    assert MODEL.ResidualMLP(dim=32, depth=2)(torch.zeros(3, 32)).shape == (3, 8)


def test_refuses_to_run_without_torchrun(monkeypatch, tmp_path):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    with pytest.raises(SystemExit, match="start me with torchrun"):
        TRAIN.main(["--out", str(tmp_path)])


def test_memory_counts_16_bytes_per_parameter_with_adam():
    net = MODEL.ResidualMLP(dim=32, depth=2)
    opt = torch.optim.Adam(net.parameters())
    net(torch.randn(4, 32)).sum().backward()
    opt.step()
    mem = MODEL.memory(net, opt)
    n = sum(p.numel() for p in net.parameters())
    steps = 4 * len(opt.state)  # Adam's step counters: one float32 scalar each
    assert (mem["params"], mem["grads"], mem["optimizer"]) == (4 * n, 4 * n,
                                                               8 * n + steps)


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    """One launch, two worlds: 2 ranks compare, try the options and TP, and save; 1
    rank reloads."""
    out = tmp_path_factory.mktemp("fsdp")
    torchrun(RUNNER, *TINY, "--out", out, "--steps", 2, "--timed", 1, "--worlds",
             "2,1", nproc=2, echo=False, timeout=120)
    return out, COMMON.load_record(out / "fsdp_w2.json", TRAIN.Compared)


@pytest.mark.slow
def test_shards_are_half_size(two_ranks):
    _, result = two_ranks
    shard = result.shard
    assert shard["placements"] == "(Shard(dim=0),)"
    assert shard["local_shapes"] == [[shard["shape"][0] // 2, shard["shape"][1]]] * 2
    for part in ("params", "grads"):
        assert result.memory["fsdp"][part] * 2 == result.memory["ddp"][part], part
    ratio = sum(result.memory["fsdp"].values()) / sum(result.memory["ddp"].values())
    assert 0.5 <= ratio < 0.501, f"FSDP2/DDP bytes {ratio:.4f}, expected 0.5"


@pytest.mark.slow
def test_fsdp_equals_one_process_and_ddp(two_ranks):
    _, r = two_ranks
    assert r.max_diff_single <= TOLERANCE, r
    assert r.max_diff_ddp <= TOLERANCE, r
    assert r.ddp_max_diff_single <= TOLERANCE, r
    assert (r.world, r.steps_f64) == (2, 2), f"{r.world} ranks, {r.steps_f64} steps"
    assert r.max_diff_single_f32 <= 1e-5, r
    assert len(r.step_s["fsdp"]) == len(r.step_s["ddp"]) == 1, r.step_s


@pytest.mark.slow
def test_bf16_policy_gathers_half_the_bytes(two_ranks):
    """Counted from the all-gathers' own outputs: a cast after the gather would not
    halve them, though the full weights it leaves would be bf16 all the same."""
    out, result = two_ranks
    v = COMMON.load_record(out / "variants.json", VARIANTS.Variants)
    fp32, bf16 = (v.gathered_forward[k] for k in ("fsdp", "fsdp_bf16"))
    assert fp32 == 2 * bf16 > 0, f"all-gathered float32 {fp32} B, bf16 {bf16} B"
    assert v.gathered_forward["fsdp_keep"] == fp32, v.gathered_forward
    assert result.gathered_forward == {"fsdp": fp32, "ddp": 0}, "DDP gathers nothing"
    held = v.held_after_forward
    assert held["fsdp"] * 10 < held["fsdp_keep"], held  # the root keeps its head
    assert v.max_diff_single["fsdp"] <= 1e-5 < v.max_diff_single["fsdp_bf16"], v


@pytest.mark.slow
def test_a_world_of_one_holds_everything(two_ranks):
    out, _ = two_ranks
    one = COMMON.load_record(out / "fsdp_w1.json", TRAIN.Compared)
    assert one.shard["local_shapes"] == [one.shard["shape"]], one.shard
    assert one.memory["fsdp"] == one.memory["ddp"], one.memory
    assert one.max_diff_single is None and one.step_s["fsdp"] == [], "one step only"


@pytest.mark.slow
def test_checkpoint_reloads_under_another_world_size(two_ranks):
    out, _ = two_ranks
    saved = torch.load(out / "saved_w2.pt", weights_only=True)
    loaded = torch.load(out / "loaded_w1.pt", weights_only=True)
    assert saved.keys() == loaded.keys()
    assert all(torch.equal(saved[k], loaded[k]) for k in saved)
    plain = MODEL.ResidualMLP(dim=32, depth=2)  # no process group at all
    state = {"model": plain.state_dict()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        dcp.load(state, checkpoint_id=out / "ckpt", no_dist=True)
    assert all(torch.equal(state["model"][k], saved[k]) for k in saved)
    fresh = MODEL.build(TRAIN.parse_args(["--out", "-", *TINY]), torch.float32,
                        torch.device("cpu"), seed=1)  # what the load started from
    assert not torch.equal(fresh.head.weight, saved["head.weight"]), "not loaded"


@pytest.mark.slow
def test_tensor_parallel_blocks_equal_the_unsplit_ones(two_ranks):
    out, _ = two_ranks
    result = COMMON.load_record(out / "tp.json", TP.Split)
    assert max(result.out_diff, result.grad_diff) <= TP.TOLERANCE, result
    blocks = result.blocks  # one all-reduce per block each way
    assert result.forward == {"all_reduce": blocks} == result.backward, result
    assert result.shapes["up.weight"] == [[128, 32], [64, 32]], result.shapes
    assert result.shapes["down.weight"] == [[32, 128], [32, 64]], result.shapes
    assert result.forward_sizes == [8 * 32] * blocks, result  # batch x dim, measured


@pytest.mark.slow
def test_reload_alone_in_a_launch_of_its_own(two_ranks, monkeypatch):
    """The path of 2-3 GPU machines: a second launch measures and reloads only (run
    here in this process as a world of one, to save the start of another torch)."""
    out, _ = two_ranks
    env = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    (out / "loaded_w1.pt").unlink()
    RUN.main(
        [*TINY, "--out", str(out), "--reload", "--threads",
         str(torch.get_num_threads())])
    one = COMMON.load_record(out / "fsdp_w1.json", TRAIN.Compared)
    assert one.max_diff_single is None and one.step_s["fsdp"] == [], "--reload times"
    saved = torch.load(out / "saved_w2.pt", weights_only=True)
    loaded = torch.load(out / "loaded_w1.pt", weights_only=True)
    assert all(torch.equal(saved[k], loaded[k]) for k in saved)
