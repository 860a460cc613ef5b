"""Device selection, on this CPU machine and on faked 0-, 1- and 2-GPU machines."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

import helpers
from helpers import devices


@pytest.fixture
def fake_gpus(monkeypatch):
    """Return a function that makes torch report `n` CUDA GPUs and optional MPS."""

    def fake(n: int, mps: bool = False) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: n > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: n)
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)

    return fake


@pytest.mark.parametrize("n", [0, 1, 2])
def test_num_gpus(fake_gpus, n):
    fake_gpus(n)
    assert helpers.num_gpus() == n


def test_num_gpus_is_zero_when_cuda_unavailable(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)  # stale count
    assert helpers.num_gpus() == 0


@pytest.mark.parametrize("n, i, expected", [
    (2, 0, "cuda:0"), (2, 1, "cuda:1"), (1, 0, "cuda:0"),
    (1, 1, "cpu"), (0, 0, "cpu"), (2, 7, "cpu"),
])
def test_try_gpu_picks_or_falls_back(fake_gpus, capsys, n, i, expected):
    fake_gpus(n)
    assert helpers.try_gpu(i) == torch.device(expected)
    said = capsys.readouterr().out
    if expected == "cpu":
        assert f"try_gpu({i})" in said and "falling back to cpu" in said
    else:
        assert said == ""


def test_try_gpu_prefers_mps_over_cpu(fake_gpus, capsys):
    fake_gpus(0, mps=True)
    assert helpers.try_gpu() == torch.device("mps")
    assert "falling back to mps" in capsys.readouterr().out


def test_try_gpu_names_what_exists(fake_gpus, capsys):
    fake_gpus(1)
    helpers.try_gpu(7)
    assert "only 1 GPU (cuda:0..cuda:0)" in capsys.readouterr().out


def test_try_gpu_quiet(fake_gpus, capsys):
    fake_gpus(0)
    helpers.try_gpu(3, verbose=False)
    assert capsys.readouterr().out == ""


def test_try_gpu_accepts_numpy_integers(fake_gpus):
    fake_gpus(2)
    assert helpers.try_gpu(np.int64(1)) == torch.device("cuda:1")


@pytest.mark.parametrize("bad", [-1, -7, 1.0, "0", True, np.int64(-1)])
def test_try_gpu_rejects_bad_index(bad):
    with pytest.raises(ValueError, match="GPU index >= 0"):
        helpers.try_gpu(bad)


@pytest.mark.parametrize("n, expected", [
    (0, ["cpu"]), (1, ["cuda:0"]), (2, ["cuda:0", "cuda:1"]),
])
def test_try_all_gpus(fake_gpus, n, expected):
    fake_gpus(n)
    assert helpers.try_all_gpus() == [torch.device(d) for d in expected]


def test_this_machine_has_no_gpu(capsys):
    """On a machine without CUDA GPUs, both helpers fall back to what exists."""
    if helpers.num_gpus():
        pytest.skip(f"this machine has {helpers.num_gpus()} CUDA GPU(s)")
    assert helpers.try_gpu(99) == helpers.fallback_device()
    assert "falling back" in capsys.readouterr().out
    assert helpers.try_all_gpus() == [torch.device("cpu")]


def test_this_machine_with_gpus(capsys):
    """On a CUDA machine, one past the last GPU falls back and every GPU is listed."""
    n = helpers.num_gpus()
    if not n:
        pytest.skip("this machine has no CUDA GPU")
    assert helpers.try_gpu(n - 1) == torch.device("cuda", n - 1)
    assert helpers.try_gpu(n) == helpers.fallback_device()
    assert f"only {n} GPU" in capsys.readouterr().out
    assert helpers.try_all_gpus() == [torch.device("cuda", i) for i in range(n)]


@pytest.fixture
def no_smi(monkeypatch):
    """Make `nvidia-smi` impossible to find, on PATH or elsewhere."""
    monkeypatch.setattr(devices.shutil, "which", lambda _: None)
    monkeypatch.setattr(devices, "_SMI_ELSEWHERE", ())


def test_env_report_without_driver(fake_gpus, no_smi):
    fake_gpus(0)
    report = helpers.env_report()
    assert f"torch {torch.__version__}" in report
    assert "CUDA GPUs: none visible" in report
    assert "nvidia-smi: not found (usually no NVIDIA driver" in report
    assert "torch.accelerator" in report


def test_missing_nvidia_smi_with_working_cuda_is_not_called_no_driver(no_smi):
    said = devices._nvidia_smi(cuda_works=True)
    assert said.startswith("nvidia-smi: not found, yet CUDA works"), said
    assert "no NVIDIA driver" not in said


def test_nvidia_smi_found_off_path(monkeypatch, tmp_path):
    """WSL keeps nvidia-smi in /usr/lib/wsl/lib, often not on PATH: look there too."""
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho '0, Fake GPU, 16384 MiB, 999.99'\n")
    fake.chmod(0o755)
    monkeypatch.setattr(devices.shutil, "which", lambda _: None)
    elsewhere = ("/nonexistent/nvidia-smi", str(fake))
    monkeypatch.setattr(devices, "_SMI_ELSEWHERE", elsewhere)
    assert devices._find_nvidia_smi() == str(fake)
    if sys.platform != "win32":  # a shell script runs only where there is /bin/sh
        assert "0, Fake GPU, 16384 MiB" in devices._nvidia_smi()


def test_env_report_lists_fake_gpus(fake_gpus, monkeypatch):
    fake_gpus(2)

    class Props:
        name, total_memory, major, minor = "Fake GPU", 16 * 2**30, 8, 0

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: Props)
    monkeypatch.setattr(devices, "_nvidia_smi", lambda **_: "nvidia-smi: faked")
    monkeypatch.setattr(devices, "_accelerator", lambda: "torch.accelerator: faked")
    report = helpers.env_report()
    assert "cuda:0: Fake GPU, 16.0 GiB, compute capability 8.0" in report
    assert "cuda:1: Fake GPU" in report


def test_nvidia_smi_failure_is_explained(monkeypatch):
    monkeypatch.setattr(devices.shutil, "which", lambda _: "/nonexistent/nvidia-smi")
    assert devices._nvidia_smi().startswith("nvidia-smi: failed to run")


@pytest.mark.slow  # a child Python: this one has imported torch already
def test_import_does_not_initialise_cuda():
    code = ("import torch, helpers, helpers.timing, helpers.plotting; "
            "print(torch.cuda.is_initialized())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "False", out.stderr


# --- rank_plan: where a launch's ranks run, on faked 0-4 GPUs and on MPS -----------

@pytest.mark.parametrize("gpus, world, expected", [
    (0, 2, (2, "cpu", "gloo")),
    (1, 2, (2, "cpu", "gloo")),  # nccl needs a GPU per rank: never 2 ranks on 1 GPU
    (2, 2, (2, "cuda", "nccl")),
    (3, 2, (2, "cuda", "nccl")),
    (3, 4, (4, "cpu", "gloo")),  # 14's 4-rank part needs 4 GPUs
    (4, 4, (4, "cuda", "nccl")),
    (1, 1, (1, "cuda", "nccl")),
    (0, None, (2, "cpu", "gloo")),
    (1, None, (2, "cpu", "gloo")),
    (2, None, (2, "cuda", "nccl")),  # world=None: every GPU when there are 2 or more
    (3, None, (3, "cuda", "nccl")),
    (4, None, (4, "cuda", "nccl")),
])
def test_rank_plan_on_faked_gpus(fake_gpus, gpus, world, expected):
    fake_gpus(gpus)
    plan = devices.rank_plan(world)
    assert (plan.world, plan.device, plan.backend) == expected
    assert plan.why, "the plan says why"
    if plan.device == "cpu" and gpus:
        assert f"has {gpus}" in plan.why, plan.why
    if plan.device == "cuda":  # every local rank its own GPU, none past the last
        assert plan.world <= gpus


def test_rank_plan_on_faked_mps_uses_cpu_processes(fake_gpus):
    fake_gpus(0, mps=True)
    plan = devices.rank_plan(2)
    assert (plan.world, plan.device, plan.backend) == (2, "cpu", "gloo")
    assert "Apple GPU" in plan.why


def test_rank_plan_rejects_no_ranks(fake_gpus):
    fake_gpus(0)
    with pytest.raises(ValueError, match="at least 1 rank"):
        devices.rank_plan(0)
