"""The hand-built DataParallel matches a full-batch step, and its checks have teeth."""

from __future__ import annotations

import threading

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from helpers import dp, num_gpus
from helpers.dp import (
    data_parallel_step,
    gather,
    parallel_apply,
    reduce_grads,
    replicate,
    scatter,
    split_sizes,
)
from helpers.models import MLP

TOL = dp.TOLERANCE  # float32 sums in a different order, nothing more


def _data(batch: int, seed: int = 0) -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(seed)
    return MLP(), torch.randn(batch, 10), torch.randn(batch, 1)


def _full_batch(model: nn.Module, x: torch.Tensor, y: torch.Tensor):
    """Return the output and the parameter gradients of one ordinary full-batch step."""
    model.zero_grad(set_to_none=True)
    out = model(x)
    F.mse_loss(out, y).backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    return out.detach(), grads


def check_matches_full_batch(batch: int, n: int) -> None:
    """Assert DP outputs and gradients equal a full-batch step, as the notebook does."""
    model, x, y = _data(batch)
    want_out, want_grads = _full_batch(model, x, y)
    with torch.no_grad():
        chunks = dp.scatter(x, n)
        outs = dp.parallel_apply(dp.replicate(model, len(chunks)), chunks)
        torch.testing.assert_close(dp.gather(outs), want_out, **TOL)
    out, _ = dp.data_parallel_step(model, x, y, F.mse_loss, n)
    torch.testing.assert_close(out, want_out, **TOL)
    for p, g in zip(model.parameters(), want_grads, strict=True):
        torch.testing.assert_close(p.grad, g, **TOL)


# --- split_sizes: exactly what DataParallel's scatter does --------------------------

@pytest.mark.parametrize(("batch", "n", "sizes"), [
    (128, 2, [64, 64]), (127, 2, [64, 63]), (128, 3, [43, 43, 42]),
    (10, 4, [3, 3, 3, 1]), (5, 4, [2, 2, 1]), (3, 8, [1, 1, 1]), (0, 2, [0, 0]),
])
def test_split_sizes_known_cases(batch, n, sizes):
    assert split_sizes(batch, n) == sizes


def test_split_sizes_match_torch_chunk_which_scatter_uses():
    # torch.nn.parallel.comm.scatter splits with tensor.chunk(len(devices)) when no
    # chunk sizes are given, which is the call DataParallel makes.
    for batch in range(0, 41):
        for n in range(1, 10):
            want = [c.shape[0] for c in torch.empty(batch, 1).chunk(n)]
            assert split_sizes(batch, n) == want, (batch, n)


@pytest.mark.skipif(num_gpus() < 2, reason="needs >= 2 GPUs for the real scatter")
@pytest.mark.parametrize("batch", [1, 5, 127, 128, 129])
def test_split_sizes_match_the_real_scatter_on_gpus(batch):
    from torch.nn.parallel.scatter_gather import scatter as real_scatter

    gpus = list(range(num_gpus()))
    chunks = real_scatter(torch.randn(batch, 3), gpus)
    assert [c.shape[0] for c in chunks] == split_sizes(batch, len(gpus))


@pytest.mark.parametrize(("batch", "n"), [(-1, 2), (4, 0)])
def test_split_sizes_rejects_bad_arguments(batch, n):
    with pytest.raises(ValueError):
        split_sizes(batch, n)


# --- the four steps -------------------------------------------------------------------

def test_scatter_splits_in_order_and_may_use_fewer_devices():
    x = torch.arange(5.0).unsqueeze(1)
    chunks = scatter(x, ["cpu"] * 4)
    assert [c.shape[0] for c in chunks] == [2, 2, 1]
    assert torch.equal(torch.cat(chunks), x)
    with pytest.raises(ValueError):
        scatter(x, [])


def test_replicate_makes_independent_copies_without_grads():
    model, x, y = _data(8)
    F.mse_loss(model(x), y).backward()
    replicas = replicate(model, 2)
    assert len(replicas) == 2
    for r in replicas:
        for p, q in zip(model.parameters(), r.parameters(), strict=True):
            assert torch.equal(p, q) and p.data_ptr() != q.data_ptr()
            assert q.grad is None and q.requires_grad
    with torch.no_grad():
        replicas[0].layer1.weight.zero_()
    assert model.layer1.weight.abs().sum() > 0


def test_parallel_apply_runs_the_replicas_at_the_same_time():
    seen = []
    together = threading.Barrier(3, timeout=10)  # breaks unless all 3 run at once

    class Probe(nn.Module):
        def forward(self, x):
            seen.append(threading.get_ident())
            together.wait()
            return x * 2

    chunks = [torch.full((2, 1), float(i)) for i in range(3)]
    outs = parallel_apply([Probe() for _ in chunks], chunks)
    assert [o[0, 0].item() for o in outs] == [0.0, 2.0, 4.0]  # order kept
    assert len(set(seen)) == 3 and threading.get_ident() not in seen


def test_parallel_apply_passes_grad_mode_and_reraises_errors():
    model, x, _ = _data(6)
    with torch.no_grad():
        outs = parallel_apply(replicate(model, 2), scatter(x, 2))
    assert all(o.grad_fn is None for o in outs)  # no_grad reached the threads

    class Boom(nn.Module):
        def forward(self, x):
            raise RuntimeError("boom in a replica")

    with pytest.raises(RuntimeError, match="boom in a replica"):
        parallel_apply([Boom(), Boom()], [x, x])
    with pytest.raises(ValueError):
        parallel_apply([Boom()], [x, x])


def test_gather_concatenates_in_order_on_the_first_device():
    parts = [torch.zeros(2, 1), torch.ones(3, 1)]
    out = gather(parts)
    assert out.shape == (5, 1) and out.device == parts[0].device
    assert out[:2].sum() == 0 and out[2:].sum() == 3


def test_reduce_grads_sums_and_accumulates():
    model = MLP()
    replicas = replicate(model, 3)
    for k, r in enumerate(replicas, start=1):
        for q in r.parameters():
            q.grad = torch.full_like(q, float(k))
    reduce_grads(model, replicas)
    assert all(torch.all(p.grad == 6) for p in model.parameters())  # 1 + 2 + 3
    reduce_grads(model, replicas)
    assert all(torch.all(p.grad == 12) for p in model.parameters())  # accumulates


# --- the whole step equals a full-batch step ------------------------------------------

@pytest.mark.parametrize(("batch", "n"), [(128, 2), (127, 2), (128, 3), (5, 4), (7, 1)])
def test_data_parallel_step_equals_full_batch(batch, n):
    check_matches_full_batch(batch, n)


def test_data_parallel_step_accepts_a_device_list_and_returns_the_loss():
    model, x, y = _data(9)
    want_out, _ = _full_batch(model, x, y)
    out, loss = data_parallel_step(model, x, y, F.mse_loss, ["cpu", "cpu", "cpu"])
    torch.testing.assert_close(loss, F.mse_loss(want_out, y), **TOL)
    assert out.requires_grad is False


# --- the checks fail for broken implementations ---------------------------------------

def test_check_catches_a_dropped_chunk(monkeypatch):
    real = dp.scatter
    monkeypatch.setattr(dp, "scatter", lambda batch, devices: real(batch, devices)[:-1])
    with pytest.raises(AssertionError):
        check_matches_full_batch(128, 2)


def test_check_catches_a_chunk_left_out_of_backward(monkeypatch):
    real = dp.parallel_apply

    def forgetful(replicas, chunks):
        outs = real(replicas, chunks)
        return outs[:-1] + [outs[-1].detach()]  # right values, no gradient from it

    monkeypatch.setattr(dp, "parallel_apply", forgetful)
    with pytest.raises(AssertionError):
        check_matches_full_batch(128, 2)


def test_check_catches_averaged_instead_of_summed_grads(monkeypatch):
    def average(module, replicas):
        for p, *copies in zip(module.parameters(), *(r.parameters() for r in replicas),
                              strict=True):
            p.grad = torch.stack([c.grad for c in copies]).mean(0)

    monkeypatch.setattr(dp, "reduce_grads", average)
    with pytest.raises(AssertionError):
        check_matches_full_batch(128, 2)


def test_check_catches_outputs_gathered_out_of_order(monkeypatch):
    real = dp.gather
    monkeypatch.setattr(dp, "gather", lambda outputs: real(outputs[::-1]))
    with pytest.raises(AssertionError):
        check_matches_full_batch(128, 2)


def _per_replica_mean_step(module, inputs, target, loss_fn, devices):
    """A plausible wrong step: each replica's own mean loss, gradients averaged."""
    chunks, targets = dp.scatter(inputs, devices), dp.scatter(target, devices)
    replicas = dp.replicate(module, len(chunks))
    outs = dp.parallel_apply(replicas, chunks)
    for out, t in zip(outs, targets, strict=True):
        loss_fn(out, t).backward()
    for p, *copies in zip(module.parameters(), *(r.parameters() for r in replicas),
                          strict=True):
        p.grad = torch.stack([c.grad for c in copies]).mean(0)
    return dp.gather(outs).detach(), None


def test_per_replica_mean_weighting_is_caught_on_uneven_splits(monkeypatch):
    monkeypatch.setattr(dp, "data_parallel_step", _per_replica_mean_step)
    check_matches_full_batch(128, 2)  # even chunks: this weighting happens to be right
    with pytest.raises(AssertionError):
        check_matches_full_batch(127, 2)  # 64 and 63 rows: each row weighted wrongly


@pytest.mark.skipif(num_gpus() < 2, reason="needs >= 2 GPUs for nn.DataParallel")
def test_real_data_parallel_grads_match_the_hand_built_step():
    model, x, y = _data(127)
    gpus = [torch.device(f"cuda:{i}") for i in range(num_gpus())]
    model.to(gpus[0])
    out_real = nn.DataParallel(model)(x.to(gpus[0]))
    F.mse_loss(out_real, y.to(gpus[0])).backward()
    real_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    out, _ = data_parallel_step(model, x.to(gpus[0]), y, F.mse_loss, gpus)
    torch.testing.assert_close(out, out_real.detach(), **dp.GPU_TOLERANCE)
    for p, g in zip(model.parameters(), real_grads, strict=True):
        torch.testing.assert_close(p.grad, g, **dp.GPU_TOLERANCE)


# --- where nn.DataParallel puts the model, and checkpoints from it --------------------

@pytest.mark.skipif(num_gpus() > 0, reason="checks the no-GPU pass-through")
def test_data_parallel_without_a_gpu_is_a_pass_through():
    model = MLP()
    wrapped = nn.DataParallel(model)
    assert wrapped.device_ids == [] and wrapped.module is model
    assert next(model.parameters()).device.type == "cpu"


@pytest.mark.skipif(num_gpus() != 1, reason="needs exactly one GPU")
def test_data_parallel_on_one_gpu_moves_the_model_when_built():
    wrapped = nn.DataParallel(MLP())
    assert next(wrapped.module.parameters()).device == torch.device("cuda", 0)


@pytest.mark.skipif(num_gpus() < 1, reason="needs a GPU to save CUDA tensors")
def test_map_location_loads_a_gpu_checkpoint_on_the_cpu():
    import io

    buffer = io.BytesIO()
    torch.save(MLP().to("cuda").state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, map_location="cpu", weights_only=True)
    assert {t.device.type for t in state.values()} == {"cpu"}
    MLP().load_state_dict(state)
