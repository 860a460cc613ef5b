"""Tests of notebook 16's scripts (gpt_fsdp.py, gpt_memory.py, gpt_build.py,
gpt_mesh.py, gpt_resume.py) in one process: a world of 1 runs the same code paths as the
notebook's launch of 4 (gpt_lessons.py), fast."""

from __future__ import annotations

import importlib
import sys

import pytest
import torch
import torch.distributed as dist
from conftest import NOTEBOOK_DIR

SCRIPTS = NOTEBOOK_DIR / "scripts"
sys.path.insert(0, str(SCRIPTS))  # as torchrun does: the scripts import their siblings
NAMES = ("gpt", "common", "gpt_fsdp", "gpt_memory", "gpt_build", "gpt_mesh",
         "gpt_resume")  # one module each, as in a launch
gpt, common, fsdp, memory, build_script, mesh_script, resume_script = map(
    importlib.import_module, NAMES)
CFG = gpt.Config(layers=1, dim=32, heads=2)  # tiny: the same code paths, fast
CPU = torch.device("cpu")

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="gloo tests on Linux")


def one_rank_mesh(shape=(1,), names=None):
    from torch.distributed.device_mesh import init_device_mesh
    return init_device_mesh("cpu", shape, mesh_dim_names=names)


def test_meta_build_has_the_replicas_weights_and_training(group):
    model = fsdp.build(CFG, torch.float64, CPU, one_rank_mesh())
    assert model.head.weight is model.tok.weight, "the tie did not survive to_empty"
    assert all(hasattr(p, "device_mesh") for p in model.parameters()), "not sharded"
    ref = fsdp.replica(CFG, torch.float64, CPU)
    assert diff(model, ref) == 0, "init_weights depends on the layout"
    data = gpt.corpus()
    for m in (model, ref):
        fsdp.train(m, fsdp.adam(m), data, 2, micro=2 if m is model else 1)
    d = diff(model, ref)
    assert d <= gpt.TOLERANCE, f"FSDP2 vs replica after 2 steps: {d:.1e}"


def diff(a, b) -> float:
    """Return the largest weight difference of two models (every rank calls it)."""
    return common.max_diff(common.full_state(a), common.full_state(b))


def test_traffic_counts_collectives_and_their_bytes(group):
    x = torch.ones(10, dtype=torch.float64)
    with common.Traffic() as traffic:
        dist.all_reduce(x)
        x + 1  # not a collective
        dist.broadcast(torch.ones(3, dtype=torch.int32), src=0)
    assert traffic.calls == {"allreduce": 1, "broadcast": 1}, traffic.calls
    assert traffic.bytes == {"allreduce": 80, "broadcast": 12}, traffic.bytes
    assert traffic.sizes == [("allreduce", 10, 80), ("broadcast", 3, 12)], traffic


def test_gpu_peak_counts_from_the_reset_above_what_was_held():
    assert fsdp.gpu_reset(CPU) == 0 and fsdp.gpu_peak(CPU) is None, "a CPU has no peak"
    if not torch.cuda.is_available():
        return  # the rest needs a CUDA GPU
    dev = torch.device("cuda")
    kept = torch.ones(2**20, device=dev)  # 4 MiB alive before the reset: not counted
    held = fsdp.gpu_reset(dev)
    freed = torch.ones(2**18, device=dev)  # 1 MiB, freed before the peak is read
    del freed
    peak = fsdp.gpu_peak(dev, held)
    assert peak == 2**20, f"peak {peak} B above what was held, expected {2**20} B"
    del kept


def test_peak_bytes_sees_a_freed_allocation():
    def fn():
        x = torch.empty(2**18)  # 1 MiB of float32, freed on return
        del x

    peak = build_script.peak_bytes(fn, CPU)
    assert 2**20 <= peak <= 2**20 + 2**16, f"peak {peak} B for a 1 MiB tensor"


def test_mesh_placements_tie_and_weights_after_a_step(group):
    from torch.distributed.tensor.parallel import loss_parallel
    mesh = one_rank_mesh((1, 1), ("dp", "tp"))
    model = fsdp.build(CFG, torch.float64, CPU, mesh["dp"], parallelize=lambda m:
                       mesh_script.tensor_parallel(m, mesh["tp"]))
    assert model.head.weight is model.tok.weight, "tensor_parallel must tie again"
    placements = {n: [str(x) for x in p.placements] for n, p in
                  model.named_parameters()}
    assert placements["blocks.0.attn.proj.weight"][1] == "S(1)", placements
    assert placements["blocks.0.mlp.fc.weight"][1] == "S(0)", placements
    assert placements["norm.weight"][1] == "R", placements
    ref = fsdp.replica(CFG, torch.float64, CPU)
    data = gpt.corpus()
    with common.Traffic() as traffic:  # loss_parallel's all-reduces run inside DTensor
        fsdp.train(model, fsdp.adam(model), data, 1, loss_context=loss_parallel)
    assert traffic.calls.get("all_reduce", 0) >= 1, f"missed: {traffic.calls}"
    fsdp.train(ref, fsdp.adam(ref), data, 1)
    d = diff(model, ref)
    assert d <= gpt.TOLERANCE, f"mesh vs replica after a step: {d:.1e}"


def test_resume_through_dcp_gives_back_every_tensor_of_the_saved_state(group, tmp_path):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict
    data = gpt.corpus()
    model = fsdp.build(CFG, torch.float64, CPU, one_rank_mesh((1, 1), ("dp", "tp"))
                       ["dp"])
    opt = fsdp.adam(model)
    fsdp.train(model, opt, data, 2)
    saved = fsdp.gathered_state(model, opt)  # read from the tensors, not a state_dict
    msd, osd = get_state_dict(model, opt)
    dcp.save({"model": msd, "optim": osd}, checkpoint_id=tmp_path / "ckpt")
    fsdp.train(model, opt, data, 1, first=2)
    res = resume_script.resume(CFG, data, CPU, one_rank_mesh(), (0, 1),
                               tmp_path / "ckpt", 2, 1)
    common.save_record(tmp_path / "resumed.pt", res)  # as gpt_lessons.py keeps it
    res = common.load_record(tmp_path / "resumed.pt", resume_script.Resumed)
    got = res.dcp_k
    assert sorted(got) == sorted(saved), sorted(set(got) ^ set(saved))
    assert any(key.endswith(":exp_avg_sq") for key in saved), "no Adam state read"
    unequal = [key for key in saved if not torch.equal(got[key], saved[key])]
    assert not unequal, f"DCP changed {unequal}"
    same = common.max_diff(res.dcp, common.full_state(model))
    assert same <= gpt.TOLERANCE, f"not the same run: {same:.1e}"
    skipped = common.max_diff(res.dcp, res.model_only)
    assert skipped > 1e-6, f"a fresh Adam changed only {skipped:.1e}"


def test_gathered_state_sees_a_changed_moment(group):
    model = fsdp.build(CFG, torch.float64, CPU, one_rank_mesh())
    opt = fsdp.adam(model)
    fsdp.train(model, opt, gpt.corpus(), 1)
    before = fsdp.gathered_state(model, opt)
    next(iter(opt.state.values()))["exp_avg"].mul_(2)  # one moment, nothing else
    after = fsdp.gathered_state(model, opt)
    unequal = [key for key in before if not torch.equal(before[key], after[key])]
    assert len(unequal) == 1 and unequal[0].endswith(":exp_avg"), unequal


def test_memory_probe_counts_what_is_alive_and_nothing_made_before():
    before = torch.ones(2**16)  # made outside: not counted
    with memory.Memory() as mem:
        a = torch.empty(2**18)  # 1 MiB
        view = a[:10]  # a view: the same storage
        b = before + 1  # 256 KiB
        before.add_(1)  # in place: not new
        held = mem.held()
        del a, b
        freed = mem.held()
    assert held == 2**20 + 2**18, f"{held} B held, want {2**20 + 2**18}"
    assert freed == 2**20, f"{freed} B after del a, b: the view keeps a's storage"
    del view
    assert mem.held() == 0, f"{mem.held()} B after the view went too"


def test_a_tensor_record_with_a_missing_field_fails_naming_it(tmp_path):
    t = {"w": torch.ones(2)}
    common.save_record(tmp_path / "r.pt", resume_script.Resumed(t, t, t, t))
    body = torch.load(tmp_path / "r.pt", weights_only=True)
    assert body["record"] == "Resumed" and torch.equal(body["dcp"]["w"], t["w"])
    del body["model_only"]
    torch.save(body, tmp_path / "r.pt")
    with pytest.raises(KeyError, match=r"\['model_only'\].*Resumed"):
        common.load_record(tmp_path / "r.pt", resume_script.Resumed)


def test_moments_measure_the_bytes_a_rank_holds(group):
    mesh = one_rank_mesh()
    f32 = torch.float32
    n = gpt.count_params(gpt.GPT(gpt.Config()))
    runs = {"ddp": lambda: fsdp.ddp(fsdp.replica(gpt.Config(), f32, CPU),
                                    mesh.get_group()),
            "kept": lambda: fsdp.build(gpt.Config(), f32, CPU, mesh,
                                       reshard_after_forward=False)}
    at = {name: memory.moments(make, gpt.corpus(), CPU, 0, 1)["at"]
          for name, make in runs.items()}
    assert at["ddp"]["at rest"] == 16 * n, at["ddp"]  # its buckets stay allocated
    assert at["ddp"]["after step"] == 16 * n, at["ddp"]
    assert at["kept"]["at rest"] == 12 * n, at["kept"]  # gradients set to None
    assert at["kept"]["after step"] == 16 * n, at["kept"]
    assert at["kept"]["after forward"] > 16 * n, at["kept"]  # full weights + shards


@pytest.mark.parametrize("knobs", [("--steps", "1"), ("--more", "0")])
def test_the_launch_refuses_knobs_its_claims_need_more_of(knobs, tmp_path, capsys):
    with pytest.raises(SystemExit):
        mesh_script.main(["--out", str(tmp_path), *knobs])
    assert "need --steps >= 2 and --more >= 1" in capsys.readouterr().err
