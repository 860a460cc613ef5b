"""Tests of helpers.launch: real torchrun runs of tiny scripts, then no leftovers."""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

psutil = pytest.importorskip("psutil", reason="a launch stops processes with psutil")

from helpers import launch  # noqa: E402
from helpers.launch import LaunchError, free_port, torchrun  # noqa: E402

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

# Each script writes its pid (and any child's) under PIDS, so tests can check them.
HEADER = """\
import os, subprocess, sys, time
from pathlib import Path
rank = int(os.environ["RANK"])
pids = Path(sys.argv[1])
pids.mkdir(exist_ok=True)
(pids / f"{rank}").write_text(str(os.getpid()))
"""


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "job.py"
    path.write_text(HEADER + body)
    return path


def _assert_nothing_left(tmp_path: Path, tag: str) -> None:
    pids = [int(p.read_text()) for p in (tmp_path / "pids").iterdir()]
    assert pids, "the script should have recorded its pids"
    left = [pid for pid in pids if psutil.pid_exists(pid)
            and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert not left, f"processes {left} outlived the launch"
    assert not launch._processes([], tag), "a process of the launch still runs"


def test_success_shows_the_command_and_streams_prefixed_lines(tmp_path, capsys):
    body = ('print(f"hi {rank}/{os.environ[\'WORLD_SIZE\']} '
            'omp={os.environ[\'OMP_NUM_THREADS\']}")\nprint("warn", file=sys.stderr)\n')
    script = _script(tmp_path, body)
    result = torchrun(script, tmp_path / "pids", nproc=2, threads=1)
    assert result.returncodes == [0]
    command = f"torchrun --standalone --nproc-per-node=2 {script} {tmp_path / 'pids'}"
    assert result.commands == [command]
    # stdout and stderr are tailed separately, so only their own orders are kept
    assert sorted(result.lines(0)) == ["hi 0/2 omp=1", "warn"]
    assert sorted(result.lines(1)) == ["hi 1/2 omp=1", "warn"]
    out = capsys.readouterr().out
    assert out.startswith(f"starting 2 processes: {command}\n"), out
    assert "[rank 1] hi 1/2 omp=1" in out and "[rank 0] warn" in out
    assert "127.0.0.1" not in out and "--tee" not in out
    _assert_nothing_left(tmp_path, result.tag)


def test_two_agents_form_one_job_on_their_own_gpus(tmp_path, monkeypatch):
    monkeypatch.setattr(launch, "num_gpus", lambda: 2)  # faked: one GPU per agent
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    body = ('print(f"{rank}/{os.environ[\'WORLD_SIZE\']} {os.environ[\'GROUP_RANK\']} '
            'gpus={os.environ[\'CUDA_VISIBLE_DEVICES\']}")\n')
    result = torchrun(_script(tmp_path, body), tmp_path / "pids", nproc=1, nnodes=2,
                      echo=False)
    assert result.returncodes == [0, 0]
    assert result.lines(0) == ["0/2 0 gpus=0"] and result.lines(1) == ["1/2 1 gpus=1"]
    assert result.commands[1].startswith("CUDA_VISIBLE_DEVICES=1 torchrun --nnodes=2 "
                                         "--node-rank=1 --nproc-per-node=1 ")
    _assert_nothing_left(tmp_path, result.tag)


@pytest.mark.parametrize(("gpus", "visible", "nnodes", "nproc", "want"), [
    (8, None, 1, 2, [None]),  # one agent: torchrun's LOCAL_RANK picks the GPU
    (1, None, 2, 1, [None, None]),  # too few GPUs: left alone (the ranks use the CPU)
    (3, None, 2, 2, [None, None]),
    (2, None, 2, 1, ["0", "1"]),
    (4, None, 2, 2, ["0,1", "2,3"]),
    (5, None, 2, 2, ["0,1", "2,3"]),
    (4, "4,5,6,7", 2, 2, ["4,5", "6,7"]),  # already narrowed: the same slices of it
    (4, "7,6,5,4", 4, 1, ["7", "6", "5", "4"]),
])
def test_agents_get_their_own_gpus_when_there_are_enough(monkeypatch, gpus, visible,
                                                         nnodes, nproc, want):
    monkeypatch.setattr(launch, "num_gpus", lambda: gpus)
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    got = [e.get("CUDA_VISIBLE_DEVICES") for e in launch._agent_gpus(nnodes, nproc)]
    assert got == want


def test_the_shown_commands_are_torchruns_own(monkeypatch):
    monkeypatch.setattr(launch, "num_gpus", lambda: 0)
    one, = launch._commands("s.py", ["--x", "1"], 2, 1, 0, {"OMP_NUM_THREADS": "2"})
    assert one == ["OMP_NUM_THREADS=2", "torchrun", "--standalone",
                   "--nproc-per-node=2", "s.py", "--x", "1"]
    first, second = launch._commands("s.py", [], 1, 2, 0, {})
    assert first[:3] == ["torchrun", "--nnodes=2", "--node-rank=0"], first
    assert second[2] == "--node-rank=1" and second[-2] == first[-2], second
    both = launch._commands("s.py", [], 1, 2, 1, {})
    assert both[0] == both[1] and "--rdzv-backend=c10d" in both[0], both
    assert "--max-restarts=1" in both[0]
    parser = __import__("torch.distributed.run", fromlist=["get_args_parser"])
    args = parser.get_args_parser().parse_args(first[1:])  # torchrun accepts them
    assert (args.nnodes, args.node_rank, args.training_script) == ("2", 0, "s.py")


def test_crash_is_named_from_its_error_file(tmp_path, capsys):
    """@record: torchrun's error file holds the exception, without its traceback."""
    body = ('from torch.distributed.elastic.multiprocessing.errors import record\n'
            '@record\ndef main():\n    if rank == 1:\n'
            '        raise ValueError(f"bad batch on rank {rank}")\n'
            '    time.sleep(60)\nmain()\n')
    t0 = time.monotonic()
    with pytest.raises(LaunchError) as info:
        torchrun(_script(tmp_path, body), tmp_path / "pids", echo=False, timeout=60)
    assert time.monotonic() - t0 < 50, "rank 0 (60 s) should be stopped, not waited for"
    err, msg = info.value, str(info.value)
    assert err.rank == 1
    assert msg.startswith("rank 1 failed: it exited with code 1. torchrun stopped")
    assert msg.splitlines()[1:] == ["    ValueError: bad batch on rank 1"], msg
    assert "Traceback" not in msg and 'File "' not in msg
    _assert_nothing_left(tmp_path, err.result.tag)


def test_without_record_or_restarts_the_last_lines_say_why(tmp_path):
    body = 'if rank == 1:\n    sys.exit("rank 1 fails")\ntime.sleep(60)\n'
    with pytest.raises(LaunchError) as info:
        torchrun(_script(tmp_path, body), tmp_path / "pids", echo=False, timeout=60)
    msg = str(info.value)
    assert info.value.rank == 1
    assert msg.startswith("rank 1 failed: it exited with code 1."), msg
    assert msg.endswith("Last lines of rank 1:\n    rank 1 fails"), msg
    assert "max-restarts" not in info.value.result.commands[0]
    _assert_nothing_left(tmp_path, info.value.result.tag)


def test_a_silent_crash_says_it_printed_nothing(tmp_path):
    body = 'if rank == 1:\n    os._exit(3)\ntime.sleep(60)\n'
    with pytest.raises(LaunchError) as info:
        torchrun(_script(tmp_path, body), tmp_path / "pids", echo=False, timeout=60)
    msg = str(info.value)
    assert info.value.rank == 1
    assert msg.startswith("rank 1 failed: it exited with code 3."), msg
    assert msg.endswith("Last lines of rank 1:\n    (nothing)"), msg
    assert str(tmp_path) not in msg and sys.executable not in msg
    _assert_nothing_left(tmp_path, info.value.result.tag)


@pytest.mark.parametrize(("failures", "cause"), [
    ({0: [1, "RuntimeError: peer gone", 200], 1: [1, "ValueError: x", 100]}, 1),
    ({0: [-signal.SIGTERM, None, False], 1: [1, None, False]}, 1),  # a victim
    ({0: [1, None, False], 1: [1, "ValueError: x", 100]}, 1),  # the error file first
    ({2: [-signal.SIGKILL, None, False], 3: [-signal.SIGTERM, None, False]}, 2),
])
def test_the_cause_is_the_first_error_file_and_never_a_victim(failures, cause):
    result = launch.LaunchResult(["torchrun"], "tag", returncodes=[1])
    said, rank = launch._failure(result, failures)
    assert rank == cause, said
    if cause == 2:
        assert said.startswith("rank 2 failed: it was killed by SIGKILL."), said


def test_hanging_rank_is_bounded_by_the_timeout(tmp_path):
    body = ('if rank == 1:\n'
            '    child = subprocess.Popen([sys.executable, "-c", '
            '"import time; time.sleep(600)"])\n'
            '    (pids / "child").write_text(str(child.pid))\n'
            '    print("waiting forever", flush=True)\n    time.sleep(600)\n')
    for limit in (15, 45):  # a busy machine may take longer to start rank 1
        t0 = time.monotonic()
        with pytest.raises(LaunchError) as info:
            torchrun(_script(tmp_path, body), tmp_path / "pids", echo=False,
                     timeout=limit)
        assert time.monotonic() - t0 < limit + 8, "the timeout did not bound it"
        msg = str(info.value)
        if "still running: rank (none)" not in msg:
            break
    assert msg.startswith(f"timed out after {limit} s; still running: rank 1."), msg
    assert msg.endswith("Last lines of rank 1:\n    waiting forever"), msg
    assert info.value.rank == 1
    assert (tmp_path / "pids" / "child").exists()
    _assert_nothing_left(tmp_path, info.value.result.tag)  # the child too


def _interrupt_when_started(pids: Path, count: int) -> None:
    """Send this process SIGINT (a notebook's interrupt) once `count` ranks run."""
    end = time.monotonic() + 60
    while time.monotonic() < end:
        if pids.is_dir() and len(list(pids.iterdir())) >= count:
            break
        time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGINT)


def test_interrupt_stops_everything(tmp_path):
    body = 'print("up", flush=True)\ntime.sleep(600)\n'
    watcher = threading.Thread(target=_interrupt_when_started,
                               args=(tmp_path / "pids", 2), daemon=True)
    watcher.start()
    with pytest.raises(LaunchError, match="^interrupted") as info:
        torchrun(_script(tmp_path, body), tmp_path / "pids", echo=False, timeout=60)
    watcher.join()
    _assert_nothing_left(tmp_path, info.value.result.tag)


def test_max_restarts_restarts_every_rank_once(tmp_path):
    body = ('attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])\n'
            'print(f"attempt {attempt}", flush=True)\n'
            'if attempt == 0 and rank == 1:\n    sys.exit("rank 1 fails once")\n'
            'if attempt == 0:\n    time.sleep(60)\n')
    result = torchrun(_script(tmp_path, body), tmp_path / "pids", nproc=2,
                      max_restarts=1, echo=False, timeout=90)
    assert result.returncodes == [0]
    assert "--max-restarts=1" in result.commands[0]
    for rank in range(2):  # both ranks ran twice: torchrun restarts the whole group
        assert result.lines(rank).count("attempt 1") == 1, result.lines(rank)
    assert "rank 1 fails once" in result.lines(1)
    _assert_nothing_left(tmp_path, result.tag)


def test_torchrun_failing_before_any_rank_shows_its_lines(tmp_path, monkeypatch):
    monkeypatch.setattr(launch, "_AGENT", 'import sys\nprint("usage: torchrun ...")\n'
                        'print("torchrun: error: bad option", file=sys.stderr)\n'
                        'sys.exit(2)\n')
    with pytest.raises(LaunchError) as info:
        torchrun(_script(tmp_path, ""), tmp_path / "pids", echo=False)
    msg = str(info.value)
    assert msg.startswith("torchrun exited with code 2 before any rank ran.")
    assert msg.splitlines()[-1].strip() == "torchrun: error: bad option"
    assert info.value.rank is None


def test_free_port_is_bindable():
    port = free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))


def test_bad_arguments_fail_early(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="no script 'missing.py'"):
        torchrun("missing.py")
    with pytest.raises(ValueError):
        torchrun(_script(tmp_path, ""), nproc=0)
    with pytest.raises(ValueError):
        torchrun(_script(tmp_path, ""), max_restarts=-1)
    monkeypatch.setattr(launch, "psutil", None)
    with pytest.raises(ModuleNotFoundError, match="pip install psutil"):
        torchrun(_script(tmp_path, ""))
