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

from helpers import launch
from helpers.launch import LaunchError, free_port, launch_pids, torchrun

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="checks use /proc")

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


def _gone(pid: int) -> bool:
    """Return True if `pid` no longer runs (a reaped or zombie process)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def _assert_nothing_left(tmp_path: Path, tag: str) -> None:
    pids = [int(p.read_text()) for p in (tmp_path / "pids").iterdir()]
    assert pids, "the script should have recorded its pids"
    assert all(_gone(pid) for pid in pids), "a worker outlived the launch"
    assert launch_pids(tag) == [], "a process of the launch is still running"


def test_success_streams_prefixed_lines(tmp_path, capsys):
    body = 'print(f"hi {rank}/{os.environ[\'WORLD_SIZE\']} '\
           'omp={os.environ[\'OMP_NUM_THREADS\']}")\nprint("warn", file=sys.stderr)\n'
    result = torchrun(_script(tmp_path, body), tmp_path / "pids", nproc=2, threads=1)
    assert result.returncodes == [0]
    # stdout and stderr are tailed separately, so only their own orders are kept
    assert sorted(result.lines(0)) == ["hi 0/2 omp=1", "warn"]
    assert sorted(result.lines(1)) == ["hi 1/2 omp=1", "warn"]
    out = capsys.readouterr().out
    assert "[rank 1] hi 1/2 omp=1" in out and "[rank 0] warn" in out
    assert "127.0.0.1" not in out and str(tmp_path) not in out
    _assert_nothing_left(tmp_path, result.tag)


def test_two_agents_form_one_job(tmp_path):
    body = ('print(f"{rank}/{os.environ[\'WORLD_SIZE\']} '
            '{os.environ[\'GROUP_RANK\']}")\n')
    result = torchrun(_script(tmp_path, body), tmp_path / "pids", nproc=1, nnodes=2,
                      echo=False)
    assert result.returncodes == [0, 0]
    assert result.lines(0) == ["0/2 0"] and result.lines(1) == ["1/2 1"]
    assert "--node-rank=1" in result.commands[1]


def test_crashing_rank_names_it_and_stops_the_others(tmp_path):
    body = ('def step():\n    raise ValueError(f"bad batch on rank {rank}")\n'
            'if rank == 1:\n    step()\ntime.sleep(60)\n')
    t0 = time.monotonic()
    with pytest.raises(LaunchError) as info:
        torchrun(_script(tmp_path, body), tmp_path / "pids", echo=False, timeout=60)
    assert time.monotonic() - t0 < 30, "rank 0 should be stopped, not waited for"
    err = info.value
    assert err.rank == 1
    assert str(err).startswith("rank 1 failed: it exited with code 1. torchrun stopped")
    assert str(err).splitlines()[-1].strip() == "ValueError: bad batch on rank 1"
    assert "Traceback" not in str(err).splitlines()[0]
    _assert_nothing_left(tmp_path, err.result.tag)


def test_hanging_rank_is_bounded_by_the_timeout(tmp_path):
    body = ('if rank == 1:\n'
            '    child = subprocess.Popen([sys.executable, "-c", '
            '"import time; time.sleep(600)"])\n'
            '    (pids / "child").write_text(str(child.pid))\n'
            '    print("waiting forever", flush=True)\n    time.sleep(600)\n')
    t0 = time.monotonic()
    with pytest.raises(LaunchError) as info:
        torchrun(_script(tmp_path, body), tmp_path / "pids", echo=False, timeout=10)
    assert time.monotonic() - t0 < 10 + 8
    msg = str(info.value)
    assert msg.startswith("timed out after 10 s; still running: rank 1.")
    assert "waiting forever" in msg and info.value.rank == 1
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


@pytest.fixture
def busy_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_busy_port_gives_a_clear_message(tmp_path, busy_port, monkeypatch):
    script = _script(tmp_path, "")
    with pytest.raises(LaunchError, match=f"port {busy_port} on 127.0.0.1 is already"):
        torchrun(script, tmp_path / "pids", port=busy_port)  # checked before starting
    monkeypatch.setattr(launch, "_port_is_free", lambda port: True)
    with pytest.raises(LaunchError, match="already in use.*port=None") as info:
        torchrun(script, tmp_path / "pids", port=busy_port, echo=False)  # torchrun's
    assert launch_pids(info.value.result.tag) == []


def test_picked_port_taken_meanwhile_is_retried(tmp_path, busy_port, monkeypatch):
    ports = iter([busy_port, free_port()])
    monkeypatch.setattr(launch, "free_port", lambda: next(ports))
    result = torchrun(_script(tmp_path, 'print("ok")\n'), tmp_path / "pids", nproc=1,
                      echo=False)
    assert result.lines(0) == ["ok"]
    assert f"--master-port={busy_port}" not in result.commands[0]


# An older torchrun, as torch 2.11 ships: no --log-line-prefix-template option (given
# one, it went to python, and every rank died of "unknown option"), and here not even
# the environment variable, so ranks print under the default "[default<N>]:" prefix.
OLD_TORCHRUN = """\
import os, sys
from torch.distributed.run import main
args = sys.argv[1:]
if any(a.startswith(("--log-line-prefix-template", "--log_line_prefix")) for a in args):
    print("Unknown option: --log-line-prefix-template", file=sys.stderr)
    sys.exit(2)
os.environ.pop("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", None)
os.environ.pop("PET_LOG_LINE_PREFIX_TEMPLATE", None)
main(args)
"""


def _use_torchrun(monkeypatch, fake: Path) -> None:
    """Make torchrun() start `fake` instead of `python -m torch.distributed.run`."""
    real = launch._command
    monkeypatch.setattr(launch, "_command", lambda *args: [
        sys.executable, str(fake), *real(*args)[3:]])


@pytest.fixture
def old_torchrun(tmp_path, monkeypatch):
    fake = tmp_path / "old_torchrun.py"
    fake.write_text(OLD_TORCHRUN)
    _use_torchrun(monkeypatch, fake)
    return fake


def test_an_older_torchrun_still_names_the_ranks(tmp_path, old_torchrun):
    body = ('print(f"{rank}/{os.environ[\'WORLD_SIZE\']}")\n'
            'print(f"err {rank}", file=sys.stderr)\n')
    result = torchrun(_script(tmp_path, body), tmp_path / "pids", nproc=2, nnodes=2,
                      echo=False)
    assert str(old_torchrun) in result.commands[0]
    for rank in range(4):  # the default prefix holds the local rank: mapped back
        assert sorted(result.lines(rank)) == [f"{rank}/4", f"err {rank}"]
    _assert_nothing_left(tmp_path, result.tag)


def test_an_older_torchrun_shows_a_crash(tmp_path, old_torchrun):
    body = 'if rank == 1:\n    sys.exit("rank 1 gives up")\ntime.sleep(60)\n'
    with pytest.raises(LaunchError) as info:
        torchrun(_script(tmp_path, body), tmp_path / "pids", echo=False, timeout=60)
    assert info.value.rank == 1
    assert str(info.value).splitlines()[-1].strip() == "rank 1 gives up"
    _assert_nothing_left(tmp_path, info.value.result.tag)


def test_a_silent_crash_shows_torchruns_own_lines(tmp_path):
    body = 'if rank == 1:\n    os._exit(3)\ntime.sleep(60)\n'
    with pytest.raises(LaunchError) as info:
        torchrun(_script(tmp_path, body), tmp_path / "pids", echo=False, timeout=60)
    msg = str(info.value)
    assert info.value.rank == 1
    assert msg.startswith("rank 1 failed: it exited with code 3.")
    head, tail = msg.split("Rank 1 printed nothing. torchrun's last lines:\n")
    lines = [line.strip() for line in tail.splitlines()]
    assert lines and lines != ["(nothing)"], msg
    assert not any(line.startswith(('File "', "Traceback")) for line in lines), msg
    assert str(tmp_path) not in msg and sys.executable not in msg
    _assert_nothing_left(tmp_path, info.value.result.tag)


def test_torchrun_failing_before_any_rank_shows_its_lines(tmp_path, monkeypatch):
    fake = tmp_path / "broken_torchrun.py"
    fake.write_text('import sys\nprint("usage: torchrun [-h] ...", file=sys.stderr)\n'
                    'print("torchrun: error: bad option", file=sys.stderr)\n'
                    'sys.exit(2)\n')
    _use_torchrun(monkeypatch, fake)
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


def test_bad_arguments_fail_early(tmp_path):
    with pytest.raises(FileNotFoundError, match="no script 'missing.py'"):
        torchrun("missing.py")
    with pytest.raises(ValueError):
        torchrun(_script(tmp_path, ""), nproc=0)


def test_tidy_hides_machine_paths(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    line = (f'File "{tmp_path}/scripts/x.py", line 3 and File '
            f'"{sys.prefix}/lib/python3.11/site-packages/torch/nn/f.py"')
    assert launch._tidy(line) == 'File "scripts/x.py", line 3 and File "torch/nn/f.py"'


def test_launch_pids_of_an_unknown_tag_is_empty():
    assert launch_pids("no-such-launch") == []


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


def test_without_restarts_a_failure_ends_the_job(tmp_path):
    body = 'if rank == 1:\n    sys.exit("rank 1 fails")\ntime.sleep(60)\n'
    with pytest.raises(LaunchError) as info:
        torchrun(_script(tmp_path, body), tmp_path / "pids", echo=False, timeout=60)
    assert info.value.rank == 1
    assert "--max-restarts=0" in info.value.result.commands[0]
    with pytest.raises(ValueError):
        torchrun(_script(tmp_path, ""), max_restarts=-1)
