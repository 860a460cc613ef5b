"""Tests of helpers.launch: real torchrun runs of tiny scripts, then no leftovers.

The runs are marked `slow` (they start processes); the command lines, the cause a
failure names and the argument checks are not.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

psutil = pytest.importorskip("psutil", reason="a launch stops processes with psutil")

from helpers import launch  # noqa: E402
from helpers.launch import (  # noqa: E402
    LaunchError,
    LaunchInterrupted,
    free_port,
    torchrun,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

# Each script writes its pid (and any child's) under PIDS, so tests can check them.
HEADER = """\
import os, subprocess, sys, time
from pathlib import Path
rank = int(os.environ["RANK"])
pids = Path(sys.argv[1])
pids.mkdir(exist_ok=True)
(pids / f"{rank}").write_text(str(os.getpid()))
def leave_a_child():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    (pids / "child").write_text(str(child.pid))
"""


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "job.py"
    path.write_text(HEADER + body)
    return path


def _running(pid: int) -> bool:
    """True while `pid` runs; a process that ends while we look has not outlived."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _assert_nothing_left(tmp_path: Path, tag: str) -> None:
    pids = {p.name: int(p.read_text()) for p in (tmp_path / "pids").iterdir()}
    assert pids, "the script should have recorded its pids"
    left = [name for name, pid in pids.items() if _running(pid)]
    assert not left, f"processes {left} outlived the launch"
    assert not launch._processes(tag), "a process of the launch still runs"


@pytest.mark.slow
def test_restarts_restart_every_rank_and_without_record_last_lines_say_why(tmp_path,
                                                                         capsys):
    body = ('attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])\n'
            'hi = f"hi {rank}/{os.environ[\'WORLD_SIZE\']} '
            'omp={os.environ[\'OMP_NUM_THREADS\']} attempt {attempt}"\n'
            'print(hi, file=sys.stderr if rank else sys.stdout, flush=True)\n'
            'if rank == 1:  # on every attempt, without @record\n'
            '    print("rank 1 fails", file=sys.stderr, flush=True)\n    os._exit(3)\n'
            'print("warn", file=sys.stderr)\ntime.sleep(60)\n')
    script = _script(tmp_path, body)
    with pytest.raises(LaunchError) as info:
        torchrun(script, tmp_path / "pids", nproc=2, threads=2, max_restarts=1)
    err, msg = info.value, str(info.value)
    command = (f"OMP_NUM_THREADS=2 torchrun --standalone --nproc-per-node=2 "
               f"--max-restarts=1 {script} {tmp_path / 'pids'}")
    assert err.result.commands == [command] and err.rank == 1
    # both ranks ran twice (torchrun restarts the whole group); stdout and stderr are
    # tailed apart, so only each stream's own order holds: rank 1 prints to stderr
    assert sorted(err.result.lines(0)) == [
        "hi 0/2 omp=2 attempt 0", "hi 0/2 omp=2 attempt 1", "warn", "warn"]
    assert msg.startswith("rank 1 failed: it exited with code 3. torchrun stopped"), msg
    assert msg.endswith("Last lines of rank 1:\n    hi 1/2 omp=2 attempt 0\n    rank 1 "
                        "fails\n    hi 1/2 omp=2 attempt 1\n    rank 1 fails"), msg
    assert str(tmp_path / "pids") not in msg and sys.executable not in msg
    out = capsys.readouterr().out
    assert out.startswith(f"starting 2 processes: {command}\n"), out
    assert "[rank 1] hi 1/2 omp=2 attempt 1\n" in out and "[rank 0] warn\n" in out
    assert "127.0.0.1" not in out and "--tee" not in out
    _assert_nothing_left(tmp_path, err.result.tag)


@pytest.mark.slow
def test_two_agents_form_one_job_and_a_left_child_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setattr(launch, "num_gpus", lambda: 2)  # faked: one GPU per agent
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("PET_LOG_LINE_PREFIX_TEMPLATE", "stray ")  # it must not win
    body = ('print(f"{rank}/{os.environ[\'WORLD_SIZE\']} {os.environ[\'GROUP_RANK\']} '
            'gpus={os.environ[\'CUDA_VISIBLE_DEVICES\']} {os.environ[\'HELLO\']} '
            'omp={os.environ.get(\'OMP_NUM_THREADS\')}")\n'
            'if rank == 1:\n    leave_a_child()  # it outlives rank 1\n'
            'else:  # lines that arrive after the agents exit are waited for\n'
            '    print("\\n".join(map(str, range(3000))))\n')
    t0 = time.monotonic()
    result = torchrun(_script(tmp_path, body), tmp_path / "pids", nproc=1, nnodes=2,
                      echo=False, timeout=60, env={"HELLO": "hi"})
    assert 0 < result.seconds <= time.monotonic() - t0 < 40, result.seconds
    assert result.returncodes == [0, 0]
    assert result.lines(0) == ["0/2 0 gpus=0 hi omp=1", *map(str, range(3000))]
    assert result.lines(1) == ["1/2 1 gpus=1 hi omp=1"], result.output
    assert result.commands[1].startswith("CUDA_VISIBLE_DEVICES=1 HELLO=hi torchrun "
                                         "--nnodes=2 --node-rank=1 --nproc-per-node=1 ")
    assert (tmp_path / "pids" / "child").exists()
    _assert_nothing_left(tmp_path, result.tag)  # the child too


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
    commands = launch._commands("s.py", [], nproc, nnodes, 0, {})
    got = [c[0].removeprefix("CUDA_VISIBLE_DEVICES=") if c[0] != "torchrun" else None
           for c in commands]
    assert got == want, commands


def test_the_shown_commands_are_torchruns_own(monkeypatch):
    monkeypatch.setattr(launch, "num_gpus", lambda: 0)
    one, = launch._commands("s.py", ["--x", "1"], 2, 1, 0, {"OMP_NUM_THREADS": "2"})
    assert one == ["OMP_NUM_THREADS=2", "torchrun", "--standalone",
                   "--nproc-per-node=2", "s.py", "--x", "1"]
    first, second = launch._commands("s.py", [], 1, 2, 0, {})
    assert first[:3] == ["torchrun", "--nnodes=2", "--node-rank=0"], first
    assert second[2] == "--node-rank=1" and second[-2] == first[-2], second
    assert first[-2].startswith("--master-port="), first  # the same port for both
    parser = __import__("torch.distributed.run", fromlist=["get_args_parser"])
    args = parser.get_args_parser().parse_args(first[1:])  # torchrun accepts them
    assert (args.nnodes, args.node_rank, args.training_script) == ("2", 0, "s.py")


@pytest.mark.slow
def test_crash_is_named_from_its_error_file(tmp_path):
    """@record: torchrun's error file holds the exception, without its traceback."""
    body = ('if rank == 1:\n'
            '    from torch.distributed.elastic.multiprocessing.errors import record\n'
            '    @record\n    def main():\n'
            '        raise ValueError(f"bad batch on rank {rank}")\n'
            '    main()\n'
            'time.sleep(60)\n')
    t0 = time.monotonic()
    with pytest.raises(LaunchError) as info:
        torchrun(_script(tmp_path, body), tmp_path / "pids", echo=False, timeout=60)
    assert time.monotonic() - t0 < 40, "rank 0 (60 s) should be stopped, not waited for"
    err, msg = info.value, str(info.value)
    assert err.rank == 1
    assert msg.startswith("rank 1 failed: it exited with code 1. torchrun stopped")
    assert msg.splitlines()[1:] == ["    ValueError: bad batch on rank 1"], msg
    assert "Traceback" not in msg and 'File "' not in msg
    _assert_nothing_left(tmp_path, err.result.tag)


@pytest.mark.parametrize(("failures", "cause", "said"), [
    ({0: [1, "RuntimeError: peer gone", 200], 1: [1, "ValueError: x", 100]}, 1,
     "exited with code 1. torchrun stopped the whole job; no process is left.\n"
     "    ValueError: x"),
    ({0: [-signal.SIGTERM, None, False], 1: [1, None, False]}, 1,  # 0: a victim
     "exited with code 1. torchrun stopped the whole job; no process is left.\n"
     "Last lines of rank 1:\n    ValueError: x"),  # without the traceback's frames
    ({0: [1, None, False], 1: [1, "ValueError: x", 100]}, 1, "exited"),  # the file
    ({2: [-signal.SIGKILL, None, False], 3: [-signal.SIGTERM, None, False]}, 2,
     "was killed by SIGKILL. torchrun stopped the whole job; no process is left.\n"
     "Last lines of rank 2:\n    (nothing)"),
])
def test_the_cause_is_the_first_error_file_and_never_a_victim(failures, cause, said):
    printed = ["Traceback (most recent call last):", '  File "job.py", line 9, in f',
               "    f()", "ValueError: x"]
    result = launch.LaunchResult(["torchrun"], "tag", [(1, s) for s in printed],
                                 returncodes=[1])
    saved = {r: launch._Failure(*f) for r, f in failures.items()}  # as read from JSON
    message, rank = launch._failure(result, saved)
    assert rank == cause, message
    assert message.startswith(f"rank {cause} failed: it {said}"), message


@pytest.mark.slow
def test_hanging_rank_is_bounded_by_the_timeout(tmp_path, monkeypatch):
    body = ('if rank == 1:\n    print("waiting forever", flush=True)\n'
            '    leave_a_child()\n    time.sleep(60)\n')
    up = []  # the launcher's clock starts once rank 1 runs: a slow start does not count

    def clock() -> float:
        if not up and (tmp_path / "pids" / "child").exists():
            up.append(time.monotonic())
        return time.monotonic() - up[0] if up else 0.0

    monkeypatch.setattr(launch, "time", SimpleNamespace(monotonic=clock,
                                                        sleep=time.sleep))
    with pytest.raises(LaunchError) as info:
        torchrun(_script(tmp_path, body), tmp_path / "pids", echo=False, timeout=2)
    assert up and time.monotonic() - up[0] < 2 + 5, "the timeout did not bound it"
    msg = str(info.value)
    assert msg.startswith("timed out after 2 s; still running: rank 1."), msg
    assert msg.endswith("Last lines of rank 1:\n    waiting forever"), msg
    assert info.value.rank == 1
    _assert_nothing_left(tmp_path, info.value.result.tag)  # the child too


def _interrupt_when_started(pids: Path, count: int) -> None:
    """Send this process SIGINT (a notebook's interrupt) once `count` ranks run."""
    end = time.monotonic() + 60
    while time.monotonic() < end:
        if pids.is_dir() and len(list(pids.iterdir())) >= count:
            break
        time.sleep(0.05)
    os.kill(os.getpid(), signal.SIGINT)


@pytest.mark.slow
def test_interrupt_stops_everything_and_is_never_a_launch_error(tmp_path):
    """A notebook's `except LaunchError` (or `except Exception`) must not swallow it."""
    body = 'print("up", flush=True)\ntime.sleep(600)\n'
    watcher = threading.Thread(target=_interrupt_when_started,
                               args=(tmp_path / "pids", 2), daemon=True)
    watcher.start()
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt, match="^interrupted") as info:
        try:
            torchrun(_script(tmp_path, body), tmp_path / "pids", echo=False,
                     timeout=60)
        except Exception as err:  # what a notebook cell may catch
            pytest.fail(f"the interrupt surfaced as {type(err).__name__}: {err}")
    watcher.join()
    assert time.monotonic() - t0 < 40, "the interrupt did not stop the launch"
    assert isinstance(info.value, LaunchInterrupted), type(info.value)
    assert "run it again" in str(info.value), str(info.value)
    _assert_nothing_left(tmp_path, info.value.result.tag)


@pytest.mark.slow
def test_a_killed_kernel_leaves_no_process_of_its_launch(tmp_path):
    """A kernel killed or restarted during a launch: the agent stops every rank."""
    body = 'print("up", flush=True)\nleave_a_child() if rank == 1 else None\n' \
           'time.sleep(600)\n'
    kernel = subprocess.Popen([sys.executable, "-c", (
        "import sys; from helpers.launch import torchrun\n"
        f"torchrun({str(_script(tmp_path, body))!r}, {str(tmp_path / 'pids')!r}, "
        "echo=False, timeout=300)")], cwd=Path(launch.__file__).parents[1])
    pids, end = tmp_path / "pids", time.monotonic() + 60
    while time.monotonic() < end and not (pids.is_dir() and len(list(
            pids.iterdir())) >= 3):  # both ranks and rank 1's child run
        time.sleep(0.05)
    kernel.kill()  # no clean-up in the kernel: what a restart does to it
    kernel.wait()
    recorded = {p.name: int(p.read_text()) for p in pids.iterdir()}
    assert len(recorded) == 3, f"the launch did not start: {recorded}"
    end = time.monotonic() + 20
    while time.monotonic() < end and any(
            psutil.pid_exists(pid) and psutil.Process(pid).status()
            != psutil.STATUS_ZOMBIE for pid in recorded.values()):
        time.sleep(0.2)
    _assert_nothing_left(tmp_path, "")


@pytest.mark.slow
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


def test_free_port_is_free_and_another_while_it_is_taken():
    port = free_port()
    assert 1024 <= port <= 65535, f"port {port} is outside 1024-65535"
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))  # free: nothing listens on it
        s.listen()
        again = free_port()
    assert again != port, f"free_port gave {port} again while it was taken"


@pytest.mark.parametrize("bad", [{"nproc": 0}, {"threads": 0}, {"timeout": 0},
                                 {"max_restarts": -1}])
def test_bad_arguments_fail_before_any_launch(tmp_path, bad, capsys):
    with pytest.raises(ValueError, match="torchrun needs"):
        torchrun(_script(tmp_path, ""), **bad)
    assert not capsys.readouterr().out, "nothing should have started"
