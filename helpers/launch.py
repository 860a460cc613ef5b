"""Run `torchrun` from a notebook cell: stream every rank's output, always clean up.

`torchrun("scripts/ddp_train.py", "--epochs", "2", nproc=2)` runs
`python -m torch.distributed.run` on this machine with a free port and prints each
worker's lines as they come, prefixed `[rank N]`. If a rank fails, the time runs out
or you interrupt the cell, every process of the launch is stopped and a `LaunchError`
names the failed rank and shows its last lines. A rank's stdout and stderr are read
separately, so their lines keep their own order but may interleave differently.
Nothing runs at import time.

The `[rank N]` prefix is asked for through the environment variable
TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE, which every supported torchrun reads (its
`--log-line-prefix-template` option is newer). A torchrun that ignores it prefixes
`[default<local rank>]:`, which is understood too.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["LaunchError", "LaunchResult", "free_port", "launch_pids", "torchrun"]

TAG = "COURSE_LAUNCH_ID"  # set in every process of a launch, so none can hide
_PREFIX = "[rank ${rank}] "  # torchrun fills in the global rank
# A line tee'd from a rank: ours, or torchrun's default "[default<local_rank>]:".
# torch itself may add "[rank0]:" to a rank's warnings; that is dropped too.
_RANK_LINE = re.compile(
    r"^(?:\[rank (?P<rank>\d+)\] ?|\[default(?P<local>\d+)\]:)(?:\[rank\d+\]: ?)?(.*)$")
_GLOG = re.compile(r"^[IWEF]\d{4} [\d:.]+ +\d+ [^\]]*\] ")  # torchrun's log prefix
_SUMMARY = re.compile(r"^\s*(time|host|error_file|traceback)\s*:|^[=*-]{8,}$")
_FAILURE = re.compile(r"rank\s*:\s*(\d+) \(local_rank: \d+\)\s*exitcode\s*:\s*(-?\d+)")
_PY_LIB = re.compile(r"[^\s\"']*/lib/python3\.\d+/(?:site-packages/|dist-packages/)?")
_CARETS = re.compile(r"^\s*[\^~]+\s*$")
_FRAME = re.compile(r'^\s*File "[^"]*", line \d+')
# Workaround, not part of torchrun: by default the rank processes share the
# rendezvous store, and after a restart a rank can read a key left by the previous
# attempt and connect to a port nobody listens on (pytorch/pytorch#135712, #167288).
# Their own store per attempt avoids that.
_RESTART_ENV = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}


class LaunchError(RuntimeError):
    """A launch failed, timed out or was interrupted; all its processes were stopped."""

    def __init__(self, message: str, rank: int | None = None,
                 result: LaunchResult | None = None):
        super().__init__(message)
        self.rank = rank
        self.result = result


@dataclass
class LaunchResult:
    """What a launch ran and printed, rank by rank."""

    commands: list[str]
    tag: str
    output: list[tuple[int, str]] = field(default_factory=list)
    agent_output: list[str] = field(default_factory=list)
    returncodes: list[int | None] = field(default_factory=list)
    exit_order: list[int] = field(default_factory=list)
    seconds: float = 0.0

    def lines(self, rank: int) -> list[str]:
        """Return the lines that `rank` printed, without the `[rank N]` prefix."""
        return [text for r, text in self.output if r == rank]

    def __repr__(self) -> str:
        ranks = sorted({r for r, _ in self.output})
        return (f"LaunchResult(ranks={ranks}, lines={len(self.output)}, "
                f"returncodes={self.returncodes}, seconds={self.seconds:.1f})")


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _port_is_free(port: int) -> bool:
    """Return True if a server could listen on `port` of 127.0.0.1 now."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _running(pid: int) -> bool:
    """Return True if `pid` exists and is not a zombie (Linux /proc)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _env_of(pid: int) -> list[bytes]:
    """Return the environment of `pid` as KEY=VALUE items ([] if unreadable)."""
    try:
        return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return []


def launch_pids(tag: str) -> list[int]:
    """Return the live processes (not zombies) that carry launch `tag` (Linux only)."""
    needle = f"{TAG}={tag}".encode()
    pids = (int(p.name) for p in Path("/proc").glob("[0-9]*"))
    return sorted(pid for pid in pids if needle in _env_of(pid) and _running(pid))


def _rank_of(pid: int) -> int | None:
    """Return the RANK a worker process was given, if it can be read."""
    for item in _env_of(pid):
        if item.startswith(b"RANK=") and item[5:].isdigit():
            return int(item[5:])
    return None


class _ExitWatch:
    """Note the order in which the ranks' worker processes exit (Linux /proc)."""

    def __init__(self, agents: list[subprocess.Popen], workers: int):
        self.agents = {p.pid for p in agents}
        self.workers, self.ranks, self.order, self.next_scan = workers, {}, [], 0.0

    def poll(self) -> None:
        """Find the workers (children of the agents); note any that exited."""
        now = time.monotonic()
        if len(self.ranks) < self.workers and now > self.next_scan:
            self.next_scan = now + 0.2
            for stat in Path("/proc").glob("[0-9]*/stat"):
                try:
                    ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
                pid = int(stat.parent.name)
                if ppid in self.agents and pid not in self.ranks:
                    self.ranks[pid] = _rank_of(pid)
        for pid, rank in self.ranks.items():
            if rank is not None and rank not in self.order and not _running(pid):
                self.order.append(rank)


def _tidy(line: str) -> str:
    """Shorten absolute paths so output holds no machine-specific directories."""
    line = line.replace(sys.executable, "python")
    line = line.replace(os.getcwd() + os.sep, "")
    line = _PY_LIB.sub("", line)
    return line.replace(os.path.expanduser("~"), "~")


def _stop(procs: list[subprocess.Popen], tag: str, grace: float = 3.0) -> None:
    """Stop the agents gently (they stop their workers), then kill what is left."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)  # the agent forwards it to its ranks
            except (ProcessLookupError, PermissionError, AttributeError):
                p.terminate()
    end = time.monotonic() + grace
    while time.monotonic() < end and any(p.poll() is None for p in procs):
        time.sleep(0.05)
    for _ in range(3):  # workers live in their own sessions; the tag finds them all
        left = [p.pid for p in procs if p.poll() is None] + launch_pids(tag)
        if not left:
            break
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    for p in procs:
        p.wait()


def _command(script: str, args: tuple, nproc: int, nnodes: int, node: int, port: int,
             log_dir: str, max_restarts: int = 0) -> list[str]:
    """Return the argv of one torchrun agent (one "node") on 127.0.0.1."""
    # --tee=3 copies each rank's stdout and stderr to ours, each line prefixed by the
    # template in TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE (set in the agent's env).
    # A job that may restart meets through the c10d rendezvous, as torchrun's docs
    # advise for fault-tolerant jobs; the static one keeps its store across restarts.
    meet = ["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}"] if (
        max_restarts) else ["--master-addr=127.0.0.1", f"--master-port={port}"]
    return [sys.executable, "-m", "torch.distributed.run",
            f"--nnodes={nnodes}", f"--node-rank={node}", f"--nproc-per-node={nproc}",
            *meet, f"--max-restarts={max_restarts}", "--monitor-interval=0.1",
            f"--log-dir={log_dir}", "--tee=3",
            script, *map(str, args)]


def _pump(stream, node: int, lines: queue.Queue) -> None:
    """Copy one agent's merged stdout/stderr into `lines`, then send a None."""
    for line in stream:
        lines.put((node, line.rstrip("\n")))
    lines.put(None)


def _stream(procs: list[subprocess.Popen], lines: queue.Queue, result: LaunchResult,
            deadline: float, echo: bool, nproc: int) -> None:
    """Print rank lines as they arrive until every agent is done."""
    open_streams, failed_at = len(procs), None
    watch = _ExitWatch(procs, nproc * len(procs))
    while open_streams:
        now = time.monotonic()
        if now > deadline:
            raise TimeoutError
        watch.poll()
        result.exit_order = watch.order
        if failed_at is None and any(p.poll() not in (None, 0) for p in procs):
            failed_at = now
        if failed_at is not None and now - failed_at > 10:  # other nodes hang: stop
            break
        try:
            item = lines.get(timeout=min(0.05, deadline - now))
        except queue.Empty:
            continue
        if item is None:
            open_streams -= 1
            continue
        node, line = item
        match = _RANK_LINE.match(line)
        if match is None:
            result.agent_output.append(line)
            continue
        if match["rank"] is not None:
            rank = int(match["rank"])
        else:  # the default prefix holds the local rank; agent `node` runs the
            rank = node * nproc + int(match["local"])  # ranks from node * nproc on
        text = _tidy(match.group(3))
        result.output.append((rank, text))
        if echo:
            print(f"[rank {rank}] {text}", flush=True)


def _without_frames(lines: list[str]) -> list[str]:
    """Drop traceback frames (file, line number, code, carets); keep what was said."""
    kept, skip_code = [], False
    for line in lines:
        if _FRAME.match(line):
            skip_code = True
        elif skip_code and line.startswith("    "):
            continue  # the frame's source line, or its ^^^ markers
        elif not (_CARETS.match(line) or line.startswith("Traceback (most recent")):
            kept.append(line)
            skip_code = False
    return kept


def _agent_tail(result: LaunchResult, count: int) -> list[str]:
    """Return torchrun's own last lines, less its traceback, summary and log stamps."""
    said = [_tidy(_GLOG.sub("", line)).rstrip()
            for line in _without_frames(result.agent_output)]
    kept = [line for line in said if line.strip() and not _SUMMARY.match(line)]
    if "Failures:" in kept:  # the summary table: its rank/exitcode lines are in ours
        kept = kept[:kept.index("Failures:")]
        if kept and kept[-1].endswith("FAILED"):
            kept.pop()  # "<script> FAILED", the table's title
    return (kept or [_tidy(s) for s in result.agent_output])[-count:]


def _failure_message(result: LaunchResult) -> tuple[str, int | None]:
    """Explain which rank failed first, with its last lines."""
    text = "\n".join(result.agent_output)
    codes = {int(r): int(c) for r, c in _FAILURE.findall(text)}
    if not codes:
        tail = "\n    ".join(_agent_tail(result, 8) or ["(nothing)"])
        code = next(c for c in result.returncodes if c)
        return (f"torchrun exited with code {code} before any rank ran. "
                f"Its last lines:\n    {tail}"), None
    # Ranks that torchrun stopped itself (SIGTERM) are victims, not causes.
    causes = [r for r in codes if codes[r] != -signal.SIGTERM] or list(codes)
    seen = [r for r in result.exit_order if r in causes]
    first = seen[0] if seen else causes[0]
    code = codes[first]
    how = f"exited with code {code}"
    if code < 0:
        how = f"was killed by signal {-code}"
        with contextlib.suppress(ValueError):
            how = f"was killed by {signal.Signals(-code).name}"
    tail = _without_frames(result.lines(first))[-5:]
    msg = (f"rank {first} failed: it {how}. torchrun stopped the whole job; "
           "no process is left.\n")
    if tail:
        msg += f"Last lines of rank {first}:\n    " + "\n    ".join(tail)
    else:  # the reason, if any, is in what torchrun itself said
        msg += (f"Rank {first} printed nothing. torchrun's last lines:\n    "
                + "\n    ".join(_agent_tail(result, 6) or ["(nothing)"]))
    return msg, first


def _timeout_message(result: LaunchResult, timeout: float, alive: list[int]) -> str:
    """Explain a timeout: which ranks were still running, and their last lines."""
    still = f"still running: rank {', '.join(map(str, alive))}. " if alive else ""
    last = "".join(f"\nLast lines of rank {r}:\n    "
                   + "\n    ".join(result.lines(r)[-4:] or ["(nothing)"])
                   for r in (alive or sorted({r for r, _ in result.output})))
    return (f"timed out after {timeout:g} s; {still}Stopped every process of the "
            "launch. A rank that never returns is often waiting in a collective "
            "(all_reduce, barrier) that another rank never reached." + last)


def _launch(script: str, args: tuple, nproc: int, nnodes: int, max_restarts: int,
            port: int, timeout: float, threads: int, echo: bool,
            env: dict | None) -> LaunchResult:
    """Start the agents, stream their ranks' lines, and stop everything at the end."""
    tag = uuid.uuid4().hex[:16]
    run_env = {**os.environ, "OMP_NUM_THREADS": str(threads),
               "MKL_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1", TAG: tag,
               # every supported torchrun reads the first; the second is how newer
               # ones read --log-line-prefix-template, so a stray one cannot win.
               "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": _PREFIX,
               "PET_LOG_LINE_PREFIX_TEMPLATE": _PREFIX,
               **(_RESTART_ENV if max_restarts else {}), **(env or {})}
    with tempfile.TemporaryDirectory(prefix="torchrun-logs-") as logs:
        cmds = [_command(script, args, nproc, nnodes, n, port, logs, max_restarts)
                for n in range(nnodes)]
        result = LaunchResult([" ".join(c[1:]) for c in cmds], tag)
        lines: queue.Queue = queue.Queue()
        procs: list[subprocess.Popen] = []
        t0 = time.monotonic()
        try:
            for cmd in cmds:
                procs.append(subprocess.Popen(
                    cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT, text=True, errors="replace", env=run_env,
                    start_new_session=True))
                threading.Thread(target=_pump, args=(procs[-1].stdout, len(procs) - 1,
                                                     lines), daemon=True).start()
            _stream(procs, lines, result, t0 + timeout, echo, nproc)
        except KeyboardInterrupt:
            _stop(procs, tag)
            raise LaunchError("interrupted: stopped every process of the launch.",
                              result=result) from None
        except TimeoutError:
            alive = sorted({_rank_of(pid) for pid in launch_pids(tag)} - {None})
            _stop(procs, tag)
            raise LaunchError(_timeout_message(result, timeout, alive),
                              rank=alive[0] if alive else None, result=result) from None
        finally:
            result.seconds = time.monotonic() - t0
        _stop(procs, tag)  # also ends anything a worker left running behind it
    result.returncodes = [p.returncode for p in procs]
    if any(result.returncodes):
        if "EADDRINUSE" in "\n".join(result.agent_output):
            raise _PortBusy(f"port {port} on 127.0.0.1 is already in use.",
                            result=result)
        msg, rank = _failure_message(result)
        raise LaunchError(msg, rank=rank, result=result)
    return result


class _PortBusy(LaunchError):
    """The rendezvous port was taken between choosing it and listening on it."""


def torchrun(script: str | os.PathLike, *script_args: object, nproc: int = 2,
             nnodes: int = 1, timeout: float = 120.0, threads: int = 1,
             port: int | None = None, echo: bool = True,
             env: dict[str, str] | None = None, max_restarts: int = 0) -> LaunchResult:
    """Run `script` with torchrun on 127.0.0.1, streaming `[rank N]` lines.

    `max_restarts`: how often torchrun restarts every rank after one fails (its
    `--max-restarts`); a restarted rank sees TORCHELASTIC_RESTART_COUNT = 1, 2, ...
    """
    if nproc < 1 or nnodes < 1 or timeout <= 0 or threads < 1 or max_restarts < 0:
        raise ValueError("torchrun needs nproc, nnodes, threads >= 1, timeout > 0 "
                         "and max_restarts >= 0")
    if not Path(script).is_file():
        raise FileNotFoundError(f"no script {str(script)!r} in {Path.cwd().name}/")
    job = (str(script), script_args, nproc, nnodes, max_restarts)
    if port is not None:
        if not _port_is_free(port):
            raise LaunchError(
                f"port {port} on 127.0.0.1 is already in use (another job, or a "
                "torchrun left over from an earlier run?). Stop that process, or pass "
                "port=None to let torchrun() pick a free port.")
        try:
            return _launch(*job, port, timeout, threads, echo, env)
        except _PortBusy as err:
            raise LaunchError(f"{err} Pass port=None to pick a free one.",
                              result=err.result) from None
    for _ in range(3):  # a free port can be taken before torchrun listens on it
        try:
            return _launch(*job, free_port(), timeout, threads, echo, env)
        except _PortBusy:
            continue
    raise LaunchError("no free port: three ports in a row were taken before use.")
