"""notebooks/scripts/step_profile.py: its options, then one real 2-rank gloo launch
whose traces helpers.profiling.step_breakdown reads."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import NOTEBOOK_DIR, load_script

from helpers.launch import torchrun
from helpers.profiling import step_breakdown

SCRIPT = NOTEBOOK_DIR / "scripts" / "step_profile.py"
if str(SCRIPT.parent) not in sys.path:  # the script imports its siblings
    sys.path.insert(0, str(SCRIPT.parent))


@pytest.fixture(scope="module")
def script():
    return load_script(SCRIPT)


def test_args_default_to_every_run_and_refuse_zero_steps(script):
    args = script.parse_args([])
    assert args.runs == ["healthy", "tiny", "item"], args.runs
    assert (args.steps, args.batch, args.device) == (4, 32, "auto")
    with pytest.raises(SystemExit):
        script.parse_args(["--steps", "0"])


def test_without_torchrun_it_says_how_to_start(script, monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    with pytest.raises(SystemExit, match="start me with torchrun"):
        script.main(["--runs", "tiny"])


@pytest.mark.skipif(sys.platform != "linux", reason="torchrun on Linux")
def test_two_gloo_ranks_write_traces_that_break_down(tmp_path):
    result = torchrun(SCRIPT, "--runs", "tiny", "item", "--steps", "2", "--batch", "2",
                      "--image-size", "8", "--width", "4", "--device", "cpu", "--out",
                      tmp_path, nproc=2, timeout=180, echo=False)
    assert any(line.startswith("item: 2 steps") for line in result.lines(0)), (
        result.output)
    for run in ("tiny", "item"):
        paths = [tmp_path / f"{run}_rank{r}.json" for r in (0, 1)]
        events = json.loads(paths[0].read_text())["traceEvents"]
        names = [e.get("name", "") for e in events]
        steps = [n for n in names if n.startswith("ProfilerStep#")]
        assert len(steps) == (8 if run == "tiny" else 2), steps  # tiny: 4x the steps
        assert "gloo:all_reduce" in names, "no all-reduce in the trace"
        b = step_breakdown(paths)
        assert b.parts["compute"] > 0 and len(b.shares) == 2, b
        assert ("aten::item" in names) == (run == "item"), run  # the planted sync
