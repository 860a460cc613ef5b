"""Held-out cases: inputs the release never shows, used only when grading.

A notebook's check tests the learner's function on inputs the learner can read (01's
PICKS table, the device lists of 02's tests), so an answer that looks them up would
pass. Grading also runs each code below, in the notebook's namespace after the
learner's answer: it defines `held_out(answer)`, a test in the course's own style
(raise AssertionError, saying why), which the exercise's `check` then runs. Key:
notebook stem, then exercise number. The judge gets them on stdin; no release holds
them (tests/test_teaching.py greps for every line).
"""

from __future__ import annotations

HELD_OUT: dict[str, dict[int, list[str]]] = {
    "01_cuda_queries": {
        3: ["""
def held_out(fn):
    for (kind, n, i), want in {("xpu", 3, 2): "xpu:2", ("cuda", 4, 3): "cuda:3",
                               ("cuda", 1, 1): "cpu", ("mps", 1, 1): "cpu",
                               (None, 0, 2): "cpu"}.items():
        with fake_accelerator(kind, n):
            got = fn(i)
        assert got == torch.device(want), (
            f"with {n} {kind or 'accelerator'} device(s), pick_device({i}) is {got!r}")
"""]},
    "02_devices": {
        1: ["""
def held_out(fn):
    for devs in (["meta", "meta"], ["cuda:3"] * 4, ["cpu"]):
        got = fn(*map(OnDevice, devs))
        assert got == torch.device(devs[0]), f"tensors all on {devs[0]} gave {got!r}"
    for devs in (["cuda:2", "cuda:3", "cuda:2"], ["meta", "cuda:0"]):
        try:
            got = fn(*map(OnDevice, devs))
        except Exception as err:
            got = err
        assert isinstance(got, ValueError), f"tensors on {devs} gave {got!r}"
"""],
        3: ["""
def held_out(fn):
    for current, d, want in ((3, "cuda", "cuda:3"), (2, "cuda:5", "cuda:5"),
                             (4, torch.device("cuda"), "cuda:4"), (2, "cpu", "cpu")):
        with fake_current_gpu(current):
            got = fn(d)
        assert got == torch.device(want), (
            f"with GPU {current} current, full_device({d!r}) gave {got!r}")
"""],
        4: ["""
def held_out(fn):
    for devs in ([torch.device("cpu")] * 5, [torch.device("meta")] * 2):
        total, made = gathered(fn, devs)
        assert len(made) == len(devs), f"{len(devs)} devices, {len(made)} shards"
        assert total.device == devs[0], f"the sum is on {total.device}"
    assert gathered(fn, [torch.device("cpu")] * 5)[0].tolist() == [10.0, 10.0], (
        "five devices: each element sums 0 + 1 + 2 + 3 + 4")
"""]},
    "17_planning_at_scale": {
        3: ["""
def held_out(fn):
    for args in ((12288, 3.1e11, 989e12, 0.41, 0.4, 0.7),
                 (65536, 1.2e10, 312e12, 0.33, 30.0, 0.0),
                 (1024, 9.9e12, 989e12, 0.27, 50.0, 6.5),
                 (3000, 7.7e11, 312e12, 0.6, 0.0, 0.25)):
        busy = args[0] * args[1] / (args[2] * args[3])
        want = busy + args[5] + max(0.0, args[4] - busy)
        got = float(fn(*args))
        assert abs(got - want) <= 1e-6 * want, (
            f"step_seconds{args} gave {got:g} s: not the estimate")
"""]},
}


def held_out(stem: str) -> dict[int, list[str]]:
    """Return {exercise number: [held-out test code, ...]} for notebook `stem`."""
    return HELD_OUT.get(stem, {})
