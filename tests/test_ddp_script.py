"""Tests of notebooks/scripts/ddp_train.py and its sequels (ddp_resume.py, ddp_eval.py,
ddp_by_hand.py, ddp_hang.py): their parts, then real 1- to 3-rank runs."""

from __future__ import annotations

import atexit
import statistics
import sys
import time

import pytest
import torch
import torch.distributed as dist
from conftest import NOTEBOOK_DIR, load_script
from torch.utils.data import DataLoader

from helpers.launch import free_port, torchrun

SCRIPT = NOTEBOOK_DIR / "scripts" / "ddp_train.py"
if str(SCRIPT.parent) not in sys.path:  # the scripts import their siblings
    sys.path.insert(0, str(SCRIPT.parent))
TINY = ["--samples", "256", "--batch-size", "32", "--image-size", "8", "--width", "4",
        "--epochs", "2"]

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="torchrun on Linux")


@pytest.fixture(scope="module")
def ddp():
    return load_script(SCRIPT)


@pytest.fixture(scope="module")
def parts():
    return load_script(SCRIPT.with_name("ddp_parts.py"))


@pytest.fixture(scope="module")
def common():
    return load_script(SCRIPT.with_name("common.py"))


def flat(net):
    return torch.nn.utils.parameters_to_vector(net.parameters()).detach()


def test_data_is_seeded_and_balanced(common):
    a, b = common.make_data(400, 8, seed=1), common.make_data(400, 8, seed=1)
    assert torch.equal(a.tensors[0], b.tensors[0])
    assert a.tensors[0].shape == (400, 1, 8, 8)
    assert set(a.tensors[1].tolist()) == {0, 1, 2, 3}


def test_net_maps_images_to_four_logits(common):
    assert common.Net(width=4)(torch.zeros(3, 1, 8, 8)).shape == (3, 4)


def test_args_have_the_documented_defaults(ddp):
    args = ddp.make_parser().parse_args([])
    assert (args.accum, args.checkpoint, args.tf32, args.amp, args.batch_size) == (
        1, "build/ddp_checkpoint.pt", "off", "off", 64)


def test_evaluate_counts_each_sample_once(common, group):
    """With a 1-process group all_reduce adds nothing: sum the strided shares here."""
    evaluate = load_script(SCRIPT.with_name("ddp_eval.py")).evaluate
    torch.manual_seed(0)
    net = common.Net(4)
    data = common.make_data(101, 8, seed=1)
    x, y = data.tensors
    with torch.no_grad():
        exact = (net(x).argmax(1) == y).sum().item()
    for world in (1, 2, 3):
        shares = [evaluate(net, data, r, world, torch.device("cpu"))
                  for r in range(world)]
        assert [sum(s) for s in zip(*shares, strict=True)] == [exact, 101], shares


def test_resume_restores_model_optimizer_and_losses(common, parts, tmp_path):
    resume = load_script(SCRIPT.with_name("ddp_resume.py")).resume
    torch.manual_seed(0)
    net = common.Net(4)
    opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
    net(torch.randn(2, 1, 8, 8)).sum().backward()
    opt.step()  # momentum buffers now exist
    path = tmp_path / "ckpt.pt"
    parts.save({"model": net.state_dict(), "optimizer": opt.state_dict(), "epoch": 0,
                "step": 16, "losses": [1.5]}, path)
    fresh = common.Net(4)
    fresh_opt = torch.optim.SGD(fresh.parameters(), lr=0.1, momentum=0.9)
    said = []
    start, losses = resume(path, fresh, fresh_opt, torch.device("cpu"), said.append)
    assert (start, losses) == (1, [1.5])
    assert torch.equal(flat(fresh), flat(net))
    assert fresh_opt.state_dict()["state"].keys() == opt.state_dict()["state"].keys()
    assert said == [f"resumed from {path} at epoch 2, after step 16"], said
    path.unlink()
    assert resume(path, fresh, fresh_opt, torch.device("cpu"), said.append) == (0, [])


def test_as_ranks_sums_over_the_threads_and_surfaces_an_error_without_a_hang():
    """Notebook 10's exercise 2 checks answers with it: it must be a real all_reduce."""
    as_ranks = load_script(SCRIPT.with_name("ddp_by_hand.py")).as_ranks
    models = [torch.nn.Linear(2, 1) for _ in range(3)]
    for r, m in enumerate(models):
        for p in m.parameters():
            p.grad = torch.full_like(p, r + 1.0)

    def twice(model, world, all_reduce):  # two collectives, as a per-tensor loop does
        for p in model.parameters():
            all_reduce(p.grad)
            p.grad /= world

    calls = as_ranks(twice, models)
    assert sorted(calls) == [0, 0, 1, 1, 2, 2], calls
    for m in models:  # (1 + 2 + 3) / 3 on every rank
        assert all(torch.equal(p.grad, torch.full_like(p, 2.0)) for p in m.parameters())

    def rank_one_fails(model, world, all_reduce):
        if model is models[1]:
            raise ValueError("rank 1 broke")
        all_reduce(model.weight.grad)  # the others would wait for rank 1

    t0 = time.monotonic()
    with pytest.raises(ValueError, match="rank 1 broke"):
        as_ranks(rank_one_fails, models)
    assert time.monotonic() - t0 < 10, "the waiting ranks should be released at once"


def test_the_planted_crash_fires_at_its_step_only(common, group):
    plant_crash = load_script(SCRIPT.with_name("ddp_resume.py")).plant_crash
    net = common.Net(4)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    plant_crash(opt, done=16, at=18)  # resumed after 16 steps: crash at the 2nd
    opt.step()
    with pytest.raises(RuntimeError, match="at step 18"):
        opt.step()
    opt.step()  # and only once


def test_bf16_autocast_trains_in_float32_weights(ddp, common, group):
    data = common.make_data(64, 8, seed=0)
    torch.manual_seed(0)
    model = torch.nn.parallel.DistributedDataParallel(common.Net(4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    total, _ = ddp.train_epoch(model, DataLoader(data, batch_size=16), opt, 1,
                               torch.device("cpu"), amp=True)
    assert torch.isfinite(total).all() and total[1] == 64
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_refuses_to_run_without_torchrun(common, monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    with pytest.raises(SystemExit, match="start me with torchrun"):
        common.setup("cpu")


@pytest.mark.parametrize(("world", "accum", "micro", "used"), [
    (1, 1, 64, 64), (2, 1, 32, 64), (2, 2, 16, 64), (3, 1, 21, 63), (5, 2, 6, 60),
    (3, 3, 7, 63), (8, 3, 2, 48), (7, 10, 1, 70), (100, 1, 1, 100)])
def test_any_world_size_gets_a_batch(ddp, world, accum, micro, used):
    """Worked by hand: the largest micro-batch (at least 1) whose world x accum copies
    fit in 64; a note names the batch used whenever it is not 64."""
    got, note = ddp.split_batch(64, world, accum)
    assert got == micro, f"{world} ranks x {accum}: micro-batch {got}, not {micro}"
    if used == 64:
        assert note == "", note
    else:
        assert f"using {used} ({micro} per process" in note, note


def test_accum_does_not_leak_gradients_across_epochs(ddp, common, group):
    """7 micro-batches with --accum 3: steps of 3, 3 and 1, and nothing left over."""
    data = common.make_data(28, 8, seed=0)
    loader = DataLoader(data, batch_size=4)
    torch.manual_seed(0)
    net = common.Net(4)
    plain = common.Net(4)
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
    diff = (flat(net) - flat(plain)).abs().max().item()
    assert diff < 1e-6, f"DDP accumulation differs from the manual steps by {diff:.1e}"


def _tolerance() -> float:
    """The script's own limit, which notebook 09 imports too (one source)."""
    return load_script(SCRIPT).TOLERANCE


def _train(out, name, nproc, *extra, work=TINY, script=SCRIPT, **launch):
    dump = out / f"{name}.pt"
    result = torchrun(script, *work, "--dump", dump, "--checkpoint",
                      out / f"{name}_ckpt.pt", *extra, nproc=nproc, echo=False,
                      timeout=180, **launch)
    return _report(dump), result


def _report(path):
    """Read a ddp_parts.Report record (a renamed or missing field raises)."""
    from importlib import import_module

    return import_module("common").load_record(path, import_module("ddp_parts").Report)


def _main_here(main, *argv) -> None:
    """Run a script's main as a world of one in this process: the same code as a
    1-rank launch, without starting another torch."""
    env = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1",
           "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port())}
    tf32 = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        mp.setattr(atexit, "register", lambda *a: None)  # no exit pause: we go on
        try:
            main([*map(str, argv), "--threads", str(torch.get_num_threads())])
        finally:
            if dist.is_initialized():  # a main that raised is still in its group
                dist.destroy_process_group()
            torch.backends.cuda.matmul.allow_tf32 = tf32[0]
            torch.backends.cudnn.allow_tf32 = tf32[1]


RESUME, EVAL = SCRIPT.with_name("ddp_resume.py"), SCRIPT.with_name("ddp_eval.py")
# --batch-size 32 does not split into 2 ranks x --accum 3 (no_sync): 2 x 3 x 5 = 30.
# 240 samples: 120 per rank, 8 steps of 3 micro-batches of 5 per epoch, none left.
TWO = ["--samples", "240", "--device", "cpu", "--accum", "3"]


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    """One 2-rank launch of ddp_eval.py (ddp_train.py, then an evaluation), read by
    the three tests below."""
    out = tmp_path_factory.mktemp("ddp")
    two, launch = _train(out, "two", 2, *TWO, "--val-samples", "101", script=EVAL)
    return out, two, launch


@pytest.mark.slow
@linux_only
def test_two_ranks_match_one_process_on_the_full_batch(ddp, two_ranks):
    out, two, _ = two_ranks
    _main_here(ddp.main, *TINY, "--samples", "240", "--batch-size", "30", "--device",
               "cpu", "--dump", out / "one.pt", "--checkpoint", out / "one_ckpt.pt")
    one = _report(out / "one.pt")
    assert two.world_size == 2 and two.backend == "gloo"
    assert torch.equal(two.params[0], two.params[1]), "ranks drifted apart"
    tol = _tolerance()
    diff = (two.params[0] - one.params[0]).abs().max().item()
    assert diff < tol, f"2 ranks differ from 1 process by {diff:.2e}, limit {tol}"
    pairs = zip(one.losses, two.losses, strict=True)
    loss_diff = max(abs(a - b) for a, b in pairs)
    assert loss_diff < tol, f"losses differ by {loss_diff:.2e}, limit {tol}"
    ckpt = torch.load(out / "two_ckpt.pt", weights_only=True)
    assert ckpt["epoch"] == 1 and "head.weight" in ckpt["model"]


@pytest.mark.slow
@linux_only
def test_a_batch_that_does_not_split_is_rounded_and_each_sample_evaluated_once(
        two_ranks):
    """The script rounds 32 to 30 with a note, never refuses; 101 new samples in
    shares of 51 and 50, all-reduced once."""
    _, res, launch = two_ranks
    note = [line for line in launch.lines(0) if line.startswith("note:")]
    assert note and "using 30" in note[0], f"rank 0 printed {launch.lines(0)[:2]}"
    # 8 steps per epoch, 2 epochs, the first 2 steps not timed.
    assert len(res.step_ms) == 2 * 8 - 2, len(res.step_ms)
    assert res.median_ms == statistics.median(res.step_ms), "not the median"
    assert res.val[1] == 101 and 0 <= res.val[0] <= 101, res.val


def test_fail_rank_crashes_at_step_two_of_its_epoch(tmp_path):
    """Without --fail-once, in every attempt. That a launch then names the failed rank
    from its @record error file is tests/test_launch.py's, for any script."""
    fail = load_script(RESUME)
    with pytest.raises(RuntimeError, match="simulated crash on rank 0 at step 2$"):
        _main_here(fail.main, *TINY, "--device", "cpu", "--fail-rank", 0,
                   "--checkpoint", tmp_path / "ckpt.pt")


@pytest.mark.slow
@linux_only
def test_a_rank_that_fails_once_resumes_to_the_same_weights(two_ranks):
    """--fail-once under --max-restarts 1: as if nothing had failed (the 2-rank run
    above trains the same, without a failure)."""
    out, plain, _ = two_ranks
    resumed, result = _train(out, "resumed", 2, *TWO, "--fail-rank", "1",
                             "--fail-epoch", "2", "--fail-once", script=RESUME,
                             max_restarts=1)
    assert any("simulated crash on rank 1" in line for line in result.lines(1))
    assert (resumed.restarts, resumed.start_epoch, resumed.start_step) == (
        1, 1, 8), resumed
    assert resumed.losses == plain.losses
    assert torch.equal(resumed.params, plain.params), "resuming changed weights"


# ddp_by_hand.py (by hand equals DDP, bit for bit): notebook 10 §1 asserts it.


@pytest.mark.slow
@linux_only
def test_the_fixed_hang_finishes(tmp_path):
    # The planted hang, caught by TORCH_DISTRIBUTED_DEBUG=DETAIL: notebook 10 §5.
    fixed = torchrun(SCRIPT.parent / "ddp_hang.py", "--fixed", nproc=2, echo=False,
                     timeout=60)
    assert fixed.lines(0) == ["accuracy 65.6% of 32 samples"], fixed.lines(0)


@pytest.mark.parametrize(("gpus", "local", "asked", "want"), [
    (0, (0, 2), "auto", ("gloo", "cpu")), (1, (1, 2), "auto", ("gloo", "cpu")),
    (2, (1, 2), "auto", ("nccl", "cuda:1")), (4, (3, 4), "cuda", ("nccl", "cuda:3")),
    (2, (1, 2), "cpu", ("gloo", "cpu"))])
def test_setup_gives_each_local_rank_its_own_gpu(common, monkeypatch, gpus, local,
                                                  asked, want):
    """On faked GPUs: nccl with device_id = cuda:LOCAL_RANK, or gloo on the CPU."""
    joined = []
    monkeypatch.setenv("LOCAL_RANK", str(local[0]))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(local[1]))
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    monkeypatch.setattr(torch.cuda, "set_device", lambda dev: None)
    monkeypatch.setattr(common.dist, "init_process_group",
                        lambda backend, **kw: joined.append((backend, kw)))
    monkeypatch.setattr(common.atexit, "register", lambda *a: None)
    dev = common.setup(asked)
    assert (joined[0][0], str(dev)) == want, joined
    if want[0] == "nccl":
        assert joined[0][1] == {"device_id": dev}, "nccl without device_id"


def test_setup_refuses_a_local_rank_without_a_gpu(common, monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "2")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "3")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    with pytest.raises(SystemExit, match="local rank 2 has no GPU of its own"):
        common.setup("cuda")
