"""Tests of helpers.stages, the ResNet stages in helpers.models, notebooks/scripts/
pipe_stages.py and the pipeline scripts that notebooks 12 and 13 launch. The
two-stage and pipelined ResNets live in notebooks 12 and 13, which assert them.

Two launches, each under the recorder of test_p2p_order.py and read twice: the
script's results, and its point-to-point order replayed as nccl would run it."""

from __future__ import annotations

import copy
import sys
from importlib import import_module  # a record's class: a dataclass needs its module

import pytest
import torch
import torch.nn.functional as F
from conftest import NOTEBOOK_DIR, load_script
from torch import nn

from helpers.models import (
    STAGE_TOLERANCE,
    make_resnet,
    max_rel_diff,
    split_stages,
    training_memory,
)
from helpers.stages import idle_fraction, overlap_time

SCRIPTS = NOTEBOOK_DIR / "scripts"
sys.path.insert(0, str(SCRIPTS))  # the scripts import their sibling pipe_stages.py
script_stages = load_script(SCRIPTS / "pipe_stages.py")
load_record = load_script(SCRIPTS / "common.py").load_record  # the scripts' records
TINY = ["--batch", "6", "--image", "16", "--repeats", "1"]
linux_only = pytest.mark.skipif(sys.platform != "linux", reason="torchrun on Linux")
two_gpus = pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")


_BUILT: dict[str, nn.Module] = {}


def _resnet(norm: str = "batch") -> nn.Module:
    """A fresh copy of make_resnet(norm=norm): building one (torchvision's resnet18,
    layer4 and all) costs far more than copying it."""
    if norm not in _BUILT:
        _BUILT[norm] = make_resnet(norm=norm)
    return copy.deepcopy(_BUILT[norm])


def _batch(n: int = 6, image: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(1)
    return torch.randn(n, 3, image, image), torch.randint(0, 10, (n,))


def _grads(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
    model.zero_grad()
    F.cross_entropy(model(x), y).backward()
    return [p.grad.clone() for p in model.parameters()]


def test_make_resnet_is_seeded_and_has_no_layer4():
    a, b = make_resnet(seed=3), make_resnet(seed=3)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(),
                                                  strict=True))
    assert isinstance(a.layer4, nn.Identity) and a.fc.in_features == 256
    assert a(torch.zeros(2, 3, 16, 16)).shape == (2, 10)


def test_make_resnet_norms():
    kinds = {type(m) for m in _resnet("group").modules()}
    assert nn.GroupNorm in kinds and nn.BatchNorm2d not in kinds
    with pytest.raises(ValueError, match="norm must be"):
        make_resnet(norm="layer")


def test_split_stages_share_modules_and_compose_to_the_model():
    model = _resnet("group")
    stage1, stage2 = split_stages(model)
    assert stage1[0] is model.conv1 and stage2[-1] is model.fc
    n_params = sum(1 for _ in stage1.parameters()) + sum(1 for _ in stage2.parameters())
    assert n_params == sum(1 for _ in model.parameters())
    x, _ = _batch()
    torch.testing.assert_close(stage2(stage1(x)), model(x))


@pytest.mark.parametrize("image", [16, 33, 64])
def test_script_cut_shape_matches_torchvisions_stage1(image):
    # notebook 12 uses the scripts' cut_shape for the torchvision model's cut too
    stage1, _ = split_stages(_resnet())
    assert stage1(torch.zeros(2, 3, image, image)).shape[1:] == (
        script_stages.cut_shape(image))


def test_idle_fraction_of_known_timelines():
    serial = [(0, "F", 0, 0.0, 1.0), (1, "F", 0, 1.0, 2.0)]
    overlapped = [(0, "F", 0, 0.0, 1.0), (1, "F", 0, 0.0, 1.0)]
    assert idle_fraction(serial) == 0.5
    assert idle_fraction(overlapped) == 0.0
    with pytest.raises(ValueError):
        idle_fraction([])


def test_overlap_time_counts_both_stages_busy():
    events = [(0, "F", 0, 0.0, 1.0), (0, "F", 1, 1.0, 2.0), (1, "F", 0, 1.5, 3.0)]
    assert overlap_time(events) == 0.5
    assert overlap_time(events[:2]) == 0


def test_training_memory_adam_is_16_bytes_per_parameter():
    mem = training_memory(1_000)
    assert mem == {"params": 4000, "grads": 4000, "optimizer": 8000, "total": 16000}
    assert training_memory(10, bytes_per_param=2, optimizer_states=0)["total"] == 40


def test_max_rel_diff_scales_by_the_reference():
    ref = [torch.tensor([1.0, -2.0]), torch.tensor([1e-3, 0.0])]
    assert max_rel_diff(ref, ref) == 0
    off = [ref[0], torch.tensor([1.1e-3, 0.0])]
    assert max_rel_diff(off, ref) == pytest.approx(0.1)
    with pytest.raises(ValueError):
        max_rel_diff(ref[:1], ref)


def _stage_grads(path) -> list[torch.Tensor]:
    return torch.load(path, weights_only=True)["grads"]


def _float64_reference(images: int) -> tuple[nn.Module, torch.Tensor, list]:
    """The scripts' unsplit model in float64 on the first images: logits, gradients."""
    whole = nn.Sequential(*script_stages.make_stages()).double()
    x, y = (t[:images] for t in _batch())
    logits = whole(x.double())
    F.cross_entropy(logits, y).backward()
    return whole, logits, [p.grad for p in whole.parameters()]


def _assert_checked_step(out, images: int):
    _, logits, grads = _float64_reference(images)
    got = _stage_grads(out / "stage0.pt") + _stage_grads(out / "stage1.pt")
    diff = max_rel_diff(got, grads)
    assert diff < 1e-6, f"float64 gradients differ by {diff:.1e} > 1e-6"
    saved = torch.load(out / "stage1.pt", weights_only=True)["logits"]
    assert saved.dtype == torch.float64 and len(saved) == images
    diff = max_rel_diff([saved], [logits])
    assert diff < 1e-6, f"float64 logits differ by {diff:.1e} > 1e-6"


def test_synthetic_batch_is_what_the_tests_use():
    x, y = script_stages.synthetic_batch(6, 16)
    assert torch.equal(x, _batch()[0]) and torch.equal(y, _batch()[1])


@pytest.mark.parametrize("image", [16, 33, 64])
def test_script_cut_shape_matches_its_stage1(image):
    stage1, _ = script_stages.make_stages()
    assert stage1(torch.zeros(2, 3, image, image)).shape[1:] == (
        script_stages.cut_shape(image))


def test_script_model_has_our_resnet14_shapes():
    got = [p.shape for stage in script_stages.make_stages() for p in stage.parameters()]
    assert got == [p.shape for p in _resnet("group").parameters()]


def test_script_stage_parser_has_the_shared_options(monkeypatch, tmp_path):
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    out = tmp_path / "new" / "d"  # --out is made with its parents, as the scripts write
    args = script_stages.stage_parser("demo").parse_args(["--out", str(out), "--batch",
                                                          "8"])
    assert (args.out, args.batch, args.image, args.threads, args.device) == (
        out, 8, 64, 3, "auto")
    assert out.is_dir(), f"{out} was not made"


def _backend_lines(run) -> list[str]:
    # the recorded launches run on the CPU (--device cpu): gloo
    lines = [line for rank in (0, 1) for line in run.lines(rank)
             if line.startswith("stage ")]
    assert len(lines) == 2, lines
    assert all(line.endswith("over gloo") for line in lines), lines
    return lines


def _launch(tmp_path_factory, script: str, *args: str):
    """One recorded 2-rank launch of `script` on the CPU: (out, calls, launch)."""
    from test_p2p_order import recorded

    out = tmp_path_factory.mktemp(script.split(".")[0])
    calls, launch = recorded(out, script, *TINY, "--device", "cpu", *args)
    return out, calls, launch


@pytest.fixture(scope="module")
def two_stages(tmp_path_factory):
    return _launch(tmp_path_factory, "pipe_two_stages.py", "--check-images", "4")


@pytest.fixture(scope="module")
def lessons(tmp_path_factory):
    # pipe_manual.py, then pipe_schedules.py on its batch, in one launch
    return _launch(tmp_path_factory, "pipe_lessons.py", "--splits", "6,2",
                   "--check-images", "4", "--check-split", "1", "--rounds", "2",
                   "--chunks", "3")


@pytest.mark.slow
@linux_only
def test_mp_script_matches_the_whole_model(two_stages):
    tmp_path, _, run = two_stages
    _backend_lines(run)
    result = load_record(tmp_path / "mp.json",
                         import_module("pipe_two_stages").TwoStages)
    assert len(result.single) == len(result.split) == 1  # --repeats 1
    assert idle_fraction(result.events) > 0.4  # naive: one stage at a time
    assert [(e.stage, e.kind) for e in result.events if e.kind == "F"] == [
        (0, "F"), (1, "F")], result.events  # one micro-batch each, rank 0's first
    _assert_checked_step(tmp_path, images=4)


@pytest.mark.slow
@linux_only
def test_pipe_two_stages_order_runs_on_nccl(two_stages):
    from test_p2p_order import count, replay

    programs = two_stages[1]
    assert count(programs[1], "recv") >= 3 and count(programs[0], "send") >= 3, (
        "the recorder saw too few sends and receives")
    said = replay(programs)
    assert said is None, said


@pytest.mark.slow
@linux_only
def test_pipe_lessons_match_the_whole_model(lessons):
    tmp_path, _, run = lessons
    _backend_lines(run)
    sweep = load_record(tmp_path / "pipe.json",
                        import_module("pipe_manual").Sweep)
    assert [r.split for r in sweep.splits] == [6, 2]  # in --splits' order
    assert all(len(r.runs) == 2 for r in sweep.splits), sweep  # 2 rounds
    # the timeline shown is the median round's: of two rounds, the faster one
    assert all(r.runs[r.shown_round] == min(r.runs) for r in sweep.splits), sweep
    m3 = sweep.splits[1].events  # split size 2 of a batch of 6: m = 3
    assert sum(e.kind == "F" for e in m3) == 2 * 3, m3  # 2 stages, m=3
    _assert_checked_step(tmp_path, images=4)
    _assert_schedules_match(tmp_path, checked=6, repeats=3)  # 2 per micro-batch


@pytest.mark.slow
@linux_only
def test_pipe_manual_and_the_library_schedules_order_runs_on_nccl(lessons):
    from test_p2p_order import count, replay

    programs = lessons[1]
    assert count(programs[1], "batch") >= 4, "the library's batched ops were not seen"
    assert count(programs[1], "recv") >= 3 + 4, "too few receives recorded"
    said = replay(programs)
    assert said is None, said


def _assert_schedules_match(out, checked: int, repeats: int):
    kind = import_module("pipe_schedules").ScheduleTimes
    timings = load_record(out / "schedules.json", kind).seconds
    assert set(timings) == {"GPipe", "1F1B"}
    assert all(len(t) == repeats for t in timings.values()), timings
    whole, logits, grads = _float64_reference(checked)
    for name in ("GPipe", "1F1B"):
        saved = [torch.load(out / f"{name}_stage{r}.pt", weights_only=True)
                 for r in (0, 1)]
        diff = max_rel_diff(saved[0]["grads"] + saved[1]["grads"], grads)
        assert diff < STAGE_TOLERANCE, f"{name}: gradients differ by {diff:.1e}"
        diff = max_rel_diff([saved[1]["logits"]], [logits])
        assert diff < STAGE_TOLERANCE, f"{name}: logits differ by {diff:.1e}"


# pipe_schedules.py alone (its own main, --chunks 2): notebook 13 launches it only
# through pipe_lessons.py, whose launch above runs its check_and_time.
