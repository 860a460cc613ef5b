"""Run `torchrun` from a notebook cell (notebooks 09-15, bench/): show, stream, stop.

`torchrun("scripts/ddp_train.py", "--epochs", 2)` first prints the command a learner
would type ("starting 2 processes: torchrun --standalone --nproc-per-node=2 ..."),
then each rank's lines as they come, as `[rank N] ...`, and returns a `LaunchResult`.
Several agents (nnodes > 1) play machines on 127.0.0.1: --node-rank and a port the
OS picked, or with max_restarts a c10d rendezvous. If the machine has nnodes * nproc
GPUs or more, agent k sees only its own nproc (CUDA_VISIBLE_DEVICES), so no two
agents' LOCAL_RANK 0 share a GPU; with fewer, GPUs are left alone (use --device cpu).

On a failure, timeout or interrupt, every process of the launch is terminated, then
killed after a grace period (psutil), and a `LaunchError` says why: the failed rank's
exception from torchrun's error file if the script's main is decorated with
`@record` (torch.distributed.elastic.multiprocessing.errors), else its last lines.
`--dump` files are deleted before the start, and an unfinished launch says that its
`--dump`/`--out` results are missing or stale, so no later cell reads them unawares.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import shlex
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

from helpers.devices import num_gpus

try:
    import psutil
except ImportError:  # only a launch needs it: `import helpers` works without
    psutil = None

__all__ = ["LaunchError", "LaunchResult", "free_port", "torchrun"]

TAG = "COURSE_LAUNCH_ID"  # set in every process of a launch, so none can hide
_PREFIX = "[rank ${rank}] "  # torchrun fills in the global rank
_PY_LIB = re.compile(r"[^\s\"']*/lib/python3\.\d+/(?:site-packages/|dist-packages/)?")
# Workaround, not part of torchrun: by default the rank processes share the
# rendezvous store, and after a restart a rank can read a key left by the previous
# attempt and connect to a port nobody listens on (pytorch/pytorch#135712, #167288).
_RESTART_ENV = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
# An agent is torchrun's own main that, when ranks fail, also saves what torchrun
# knows of each: exit code, the message in its error file (written if the script's
# main is decorated with @record) and when that file was written. No log is parsed.
_AGENT = """import json, os, sys
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.run import main
try:
    main(sys.argv[1:])
except ChildFailedError as err:
    json.dump({r: [f.exitcode, f.message.get("message") if isinstance(f.message, dict)
                   else None, os.path.isfile(f.error_file) and os.stat(f.error_file)
                   .st_mtime_ns] for r, f in err.failures.items()},
              open(os.environ["COURSE_FAILURES"], "w"))
    sys.exit(1)
"""


class LaunchError(RuntimeError):
    """A launch failed, timed out or was interrupted; all its processes were stopped."""

    def __init__(self, message: str, rank: int | None = None,
                 result: LaunchResult | None = None):
        super().__init__(message)
        self.rank, self.result = rank, result


@dataclass
class LaunchResult:
    """What a launch ran (`commands`: one per agent, as typed) and printed, by rank."""

    commands: list[str]
    tag: str
    output: list[tuple[int, str]] = field(default_factory=list)
    agent_output: list[str] = field(default_factory=list)  # torchrun's own lines
    returncodes: list[int | None] = field(default_factory=list)
    seconds: float = 0.0

    def lines(self, rank: int) -> list[str]:
        """Return the lines that `rank` printed, without the `[rank N]` prefix."""
        return [text for r, text in self.output if r == rank]


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _agent_gpus(nnodes: int, nproc: int) -> list[dict[str, str]]:
    """Return each agent's CUDA_VISIBLE_DEVICES: its own GPUs, if there are enough."""
    count = num_gpus()
    if nnodes == 1 or count < nnodes * nproc:
        return [{}] * nnodes
    seen = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = seen.split(",")[:count] if seen else [str(i) for i in range(count)]
    return [{"CUDA_VISIBLE_DEVICES": ",".join(ids[k * nproc:(k + 1) * nproc])}
            for k in range(nnodes)]


def _commands(script: str, args: list[str], nproc: int, nnodes: int,
              max_restarts: int, env: dict[str, str]) -> list[list[str]]:
    """Return each agent's command line, as a learner would type it."""
    port, gpus = free_port(), _agent_gpus(nnodes, nproc)
    after = [f"--max-restarts={max_restarts}"] if max_restarts else []
    meet: list[list[str]] = [["--standalone"]] * nnodes  # one agent
    if nnodes > 1 and max_restarts:  # c10d: the same command on every agent
        meet = [[f"--nnodes={nnodes}", "--rdzv-backend=c10d",
                 f"--rdzv-endpoint=127.0.0.1:{port}"]] * nnodes
    elif nnodes > 1:
        meet = [[f"--nnodes={nnodes}", f"--node-rank={k}"] for k in range(nnodes)]
        after = ["--master-addr=127.0.0.1", f"--master-port={port}"]
    return [[*(f"{k}={v}" for k, v in {**gpus[n], **env}.items()), "torchrun",
             *meet[n], f"--nproc-per-node={nproc}", *after, script, *args]
            for n in range(nnodes)]


def _tidy(line: str) -> str:
    """Shorten absolute paths so output holds no machine-specific directories."""
    line = line.replace(sys.executable, "python").replace(os.getcwd() + os.sep, "")
    return _PY_LIB.sub("", line).replace(os.path.expanduser("~"), "~")


def _processes(agents: list[subprocess.Popen], tag: str) -> list:
    """Return the live processes of a launch: agents, descendants, orphans (tag)."""
    found = {}
    for agent in agents:
        with contextlib.suppress(psutil.Error):
            if agent.poll() is None:  # not reaped, so its pid is still its own
                root = psutil.Process(agent.pid)
                found |= {p.pid: p for p in [root, *root.children(recursive=True)]}
    for p in psutil.process_iter():
        with contextlib.suppress(psutil.Error, OSError):
            if p.pid not in found and p.environ().get(TAG) == tag:
                found[p.pid] = p
    return list(found.values())


def _stop_groups(agents: list[subprocess.Popen], grace: float) -> list[int]:
    """Without psutil (POSIX only): signal each agent's process group, then reap."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for agent in agents:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(agent.pid, sig)  # its session: torchrun and its workers
        end = time.monotonic() + grace
        while time.monotonic() < end and any(a.poll() is None for a in agents):
            time.sleep(0.05)
    return []  # which ranks still ran is unknown without psutil


def _stop(agents: list[subprocess.Popen], tag: str, grace: float = 3.0) -> list[int]:
    """Terminate every process of the launch, kill what outlives `grace`, reap.

    Return the ranks whose workers were still running.
    """
    if psutil is None:
        return _stop_groups(agents, grace)
    procs, ranks = _processes(agents, tag), set()
    for p in procs:
        with contextlib.suppress(psutil.Error, KeyError, ValueError):
            ranks.add(int(p.environ()["RANK"]))  # a worker's (or its child's)
        with contextlib.suppress(psutil.Error):
            p.terminate()
    end = time.monotonic() + grace
    while time.monotonic() < end and any(_alive(p) for p in procs):
        time.sleep(0.05)
    for p in procs + _processes(agents, tag):  # and any started meanwhile
        with contextlib.suppress(psutil.Error):
            p.kill()
    for agent in agents:
        agent.wait()
    return sorted(ranks)


def _alive(p) -> bool:
    """Return True if psutil process `p` still runs (a zombie has ended)."""
    with contextlib.suppress(psutil.Error):
        return p.status() != psutil.STATUS_ZOMBIE
    return False


def _pump(stream, lines: queue.Queue) -> None:
    """Copy one agent's merged stdout/stderr into `lines`, then send a None."""
    for line in stream:
        lines.put(line.rstrip("\n"))
    lines.put(None)


def _stream(agents: list[subprocess.Popen], lines: queue.Queue, result: LaunchResult,
            deadline: float, echo: bool) -> None:
    """Print the ranks' lines as they arrive, until every agent is done."""
    open_streams, failed_at = len(agents), None
    while open_streams:
        now = time.monotonic()
        if now > deadline:
            raise TimeoutError
        if failed_at is None and any(a.poll() not in (None, 0) for a in agents):
            failed_at = now
        if failed_at is not None and now - failed_at > 10:  # another agent hangs
            return
        with contextlib.suppress(queue.Empty):
            line = lines.get(timeout=min(0.1, deadline - now))
            head, _, text = (line or "").partition("] ")
            if head[:6] == "[rank " and head[6:].isdigit():
                rank = int(head[6:])
                text = _tidy(text.removeprefix(f"[rank{rank}]:"))  # torch's own prefix
                result.output.append((rank, text))
                if echo:
                    print(f"[rank {rank}] {text}", flush=True)
            elif line is None:
                open_streams -= 1
            else:
                result.agent_output.append(line)


def _said(lines: list[str], count: int) -> str:
    """Return the last `count` lines that are not traceback frames, indented."""
    kept = [s for s in lines if s.strip() and not s[:1].isspace()
            and not s.startswith("Traceback (most recent call last)")][-count:]
    return "\n    " + "\n    ".join(kept or ["(nothing)"])


def _failure(result: LaunchResult, failures: dict) -> tuple[str, str, int | None]:
    """Explain which rank failed first (a sentence), and why (the lines after it)."""
    if not failures:
        return (f"torchrun exited with code {max(result.returncodes, key=abs)} before "
                "any rank ran.", f"\nIts last lines:{_said(result.agent_output, 3)}",
                None)
    # Ranks that torchrun stopped (SIGTERM) are victims, not causes; of the others,
    # the first to write its error file (@record) is the cause, else the lowest rank.
    causes = {r: f for r, f in failures.items() if f[0] != -signal.SIGTERM} or failures
    rank = min(causes, key=lambda r: (not causes[r][2], causes[r][2], r))
    code, error, _ = causes[rank]
    how = f"exited with code {code}"
    with contextlib.suppress(ValueError):
        how = f"was killed by {signal.Signals(-code).name}" if code < 0 else how
    return (f"rank {rank} failed: it {how}. torchrun stopped the whole job; no process "
            "is left.", f"\n    {error}" if error else
            f"\nLast lines of rank {rank}:{_said(result.lines(rank), 5)}", rank)


def _stale(args: list[str]) -> str:
    """Say that an unfinished launch's `--dump`/`--out` results are missing or stale."""
    named = ", ".join(path for flag, path in zip(args, args[1:], strict=False)
                      if flag in ("--dump", "--out"))
    return (f" Its results in {named} are missing or from an earlier run: rerun this "
            "cell before the cells that read them.") if named else ""


def torchrun(script: str | os.PathLike, *script_args: object, nproc: int = 2,
             nnodes: int = 1, timeout: float = 120.0, threads: int = 1,
             echo: bool = True, env: dict[str, str] | None = None,
             max_restarts: int = 0) -> LaunchResult:
    """Run `script` under torchrun here, streaming `[rank N]` lines (notebooks 09-15).

    `nproc` ranks on each of `nnodes` agents; `threads` sets OMP_NUM_THREADS and
    MKL_NUM_THREADS; `env` adds variables (over the GPU split); `echo=False` keeps
    the ranks' lines in the result unprinted; `max_restarts` is torchrun's
    --max-restarts (a restart sees TORCHELASTIC_RESTART_COUNT = 1, 2, ...).
    """
    if nproc < 1 or nnodes < 1 or timeout <= 0 or threads < 1 or max_restarts < 0:
        raise ValueError("torchrun needs nproc, nnodes, threads >= 1, timeout > 0 "
                         "and max_restarts >= 0")
    if not Path(script).is_file():
        raise FileNotFoundError(f"no script {str(script)!r} in {Path.cwd().name}/")
    if psutil is None and not hasattr(os, "killpg"):
        raise ModuleNotFoundError("torchrun() needs psutil here: pip install psutil")
    args = [str(a) for a in script_args]
    for flag, path in zip(args, args[1:], strict=False):
        if flag == "--dump" and Path(path).is_file():
            Path(path).unlink()  # the launch writes it anew, or no later cell reads it
    shown = {"OMP_NUM_THREADS": str(threads)} if threads != 1 else {}
    typed = _commands(str(script), args, nproc, nnodes, max_restarts,
                      {**shown, **(env or {})})
    result = LaunchResult([_tidy(shlex.join(c)) for c in typed], uuid.uuid4().hex[:16])
    print(f"starting {nproc * nnodes} processes" + (f" on {nnodes} agents:\n  " if
          nnodes > 1 else ": ") + "\n  ".join(result.commands), flush=True)
    run_env = {**os.environ, "OMP_NUM_THREADS": str(threads), TAG: result.tag,
               "MKL_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1",
               # every supported torchrun reads the first; newer ones read the
               # second for --log-line-prefix-template, so a stray one cannot win
               "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE": _PREFIX,
               "PET_LOG_LINE_PREFIX_TEMPLATE": _PREFIX,
               **(_RESTART_ENV if max_restarts else {})}
    lines: queue.Queue = queue.Queue()
    agents: list[subprocess.Popen] = []
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="torchrun-") as logs:
        try:
            for n, cmd in enumerate(typed):
                at = cmd.index("torchrun")  # what comes before it sets variables
                agents.append(subprocess.Popen(
                    [sys.executable, "-c", _AGENT, "--tee=3", "--monitor-interval=0.1",
                     f"--log-dir={logs}/{n}", *cmd[at + 1:]], env={
                        **run_env, **dict(a.split("=", 1) for a in cmd[:at]),
                        "COURSE_FAILURES": f"{logs}/failures{n}.json"},
                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT, text=True, errors="replace",
                    start_new_session=True))
                threading.Thread(target=_pump, args=(agents[-1].stdout, lines),
                                 daemon=True).start()
            _stream(agents, lines, result, t0 + timeout, echo)
            end = time.monotonic() + 5  # their output has ended: let them exit
            for agent in agents:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    agent.wait(max(0.0, end - time.monotonic()))
        except KeyboardInterrupt:
            _stop(agents, result.tag)
            raise LaunchError("interrupted: stopped every process of the launch."
                              + _stale(args), result=result) from None
        except TimeoutError:
            alive = _stop(agents, result.tag)
            last = "".join(f"\nLast lines of rank {r}:{_said(result.lines(r), 4)}"
                           for r in alive)
            raise LaunchError(
                f"timed out after {timeout:g} s; still running: rank "
                f"{', '.join(map(str, alive)) or '(none)'}. Stopped every process of "
                "the launch. A rank that never returns is often waiting in a "
                "collective (all_reduce, barrier) that another rank never reached."
                + _stale(args) + last, rank=alive[0] if alive else None,
                result=result) from None
        finally:
            result.seconds = time.monotonic() - t0
        _stop(agents, result.tag)  # also ends anything a rank left running behind it
        result.returncodes = [a.returncode for a in agents]
        failures = {int(r): f for n in range(nnodes)
                    if (saved := Path(logs, f"failures{n}.json")).exists()
                    for r, f in json.loads(saved.read_text()).items()}
    if any(result.returncodes):
        said, why, rank = _failure(result, failures)
        raise LaunchError(said + _stale(args) + why, rank=rank, result=result)
    return result
