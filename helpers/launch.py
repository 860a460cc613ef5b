"""Run `torchrun` from a notebook cell: show the command, stream each rank, stop it all.

On a failure, timeout or interrupt, psutil stops every process of the launch, and a
`LaunchError` says why: the failed rank's exception from torchrun's error file (main
decorated with `@record`), else its last lines. Used by notebooks 09-17 and bench/.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from helpers.devices import num_gpus

try:
    import psutil
except ImportError:  # only a launch needs it: `import helpers` works without
    psutil = None

__all__ = ["LaunchError", "LaunchResult", "free_port", "torchrun"]

TAG = "COURSE_LAUNCH_ID"  # set in every process of a launch, so none can hide
# Workaround, not part of torchrun: by default the rank processes share the
# rendezvous store, and after a restart a rank can read a key left by the previous
# attempt and connect to a port nobody listens on (pytorch/pytorch#135712, #167288).
_RESTART_ENV = {"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"}
# torchrun's own main that, when ranks fail, also saves what torchrun knows of each:
# exit code, the message in its error file (@record) and when that file was written.
# Then it exits at once: tearing torch down takes seconds on a busy machine.
_AGENT = """import json, os, sys
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.run import main
code = 0
try:
    main(sys.argv[1:])
except ChildFailedError as err:
    with open(os.environ["COURSE_FAILURES"], "w") as saved:
        json.dump({r: [f.exitcode, f.message.get("message") if isinstance(
            f.message, dict) else None, os.path.isfile(f.error_file) and os.stat(
            f.error_file).st_mtime_ns] for r, f in err.failures.items()}, saved)
    code = 1
sys.stdout.flush(), sys.stderr.flush()
os._exit(code)
"""


class LaunchError(RuntimeError):
    """A launch failed, timed out or was interrupted; it stopped all (notebook 10)."""

    def __init__(self, message: str, rank: int | None = None,
                 result: LaunchResult | None = None):
        super().__init__(message)
        self.rank, self.result = rank, result


@dataclass
class LaunchResult:
    """What a launch ran (`commands`, one per agent) and printed (notebooks 09-17)."""

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
    """Return a TCP port on 127.0.0.1 that nothing listens on now (notebook 09)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _agent_gpus(nnodes: int, nproc: int) -> list[dict[str, str]]:
    """Return each agent's CUDA_VISIBLE_DEVICES: its own GPUs, if there are enough."""
    count, seen = num_gpus(), os.environ.get("CUDA_VISIBLE_DEVICES")
    if nnodes == 1 or count < nnodes * nproc:
        return [{}] * nnodes  # too few: left alone (the ranks use the CPU)
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
    elif nnodes > 1:  # agents play machines on 127.0.0.1
        meet = [[f"--nnodes={nnodes}", f"--node-rank={k}"] for k in range(nnodes)]
        after = ["--master-addr=127.0.0.1", f"--master-port={port}"]
    return [[*(f"{k}={v}" for k, v in {**gpus[n], **env}.items()), "torchrun",
             *meet[n], f"--nproc-per-node={nproc}", *after, script, *args]
            for n in range(nnodes)]


def _processes(agents: list[subprocess.Popen], tag: str) -> dict:
    """Return the live processes of a launch (agents, descendants, tag), with RANK."""
    found = {}
    for agent in (a for a in agents if a.poll() is None):  # unreaped: its own pid
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(agent.pid)
            found |= dict.fromkeys([root, *root.children(recursive=True)])
    for p in psutil.process_iter(["environ"]):  # unreadable: None
        env = p.info["environ"] or {}
        if p in found or env.get(TAG) == tag:
            found[p] = env.get("RANK")
    return found


def _stop(agents: list[subprocess.Popen], tag: str, grace: float = 3.0) -> list[int]:
    """Stop the launch's processes (kill what outlives `grace`); return their ranks."""
    procs = _processes(agents, tag)
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    roots = {a.pid for a in agents}  # torchrun takes seconds to exit: not waited for
    _, alive = psutil.wait_procs([p for p in procs if p.pid not in roots], grace)
    for p in [*alive, *_processes(agents, tag)]:  # the agents, any started meanwhile
        with contextlib.suppress(psutil.Error):
            p.kill()
    for agent in agents:
        agent.wait()
    return sorted({int(r) for r in procs.values() if r is not None})


def _stream(agents: list[subprocess.Popen], result: LaunchResult, deadline: float,
            echo: bool) -> None:
    """Print the ranks' lines as they arrive, until every agent has exited."""
    def read(stream) -> None:  # "[rank N] " is torchrun's prefix, "[rankN]:" torch's
        for line in (s.rstrip("\n") for s in stream):
            head, _, text = line.partition("] ")
            if head[:6] != "[rank " or not (rank := head[6:]).isdigit():
                result.agent_output.append(line)
                continue
            result.output.append((int(rank), text.removeprefix(f"[rank{rank}]:")))
            if echo:  # one write per line, so two agents' lines never mix
                sys.stdout.write(f"[rank {rank}] {result.output[-1][1]}\n")
                sys.stdout.flush()

    readers = [threading.Thread(target=read, args=(a.stdout,), daemon=True)
               for a in agents]
    for reader in readers:
        reader.start()
    while any(r.is_alive() for r in readers) or any(a.poll() is None for a in agents):
        if time.monotonic() > deadline:
            raise TimeoutError
        time.sleep(0.05)


def _said(lines: list[str], count: int) -> str:
    """Return the last `count` lines that are not traceback frames, indented."""
    kept = [s for s in lines if s.strip() and not s[:1].isspace()
            and not s.startswith("Traceback (most recent call last)")][-count:]
    return "\n    " + "\n    ".join(kept or ["(nothing)"])


def _failure(result: LaunchResult, failures: dict) -> tuple[str, int | None]:
    """Say which rank failed first and why; return that and the rank."""
    if not failures:
        return (f"torchrun exited with code {max(result.returncodes, key=abs)} before "
                f"any rank ran.\nIts last lines:{_said(result.agent_output, 3)}", None)
    # Ranks that torchrun stopped (SIGTERM) are victims, not causes; of the others,
    # the first to write its error file (@record) is the cause, else the lowest rank.
    causes = {r: f for r, f in failures.items() if f[0] != -signal.SIGTERM} or failures
    rank = min(causes, key=lambda r: (not causes[r][2], causes[r][2], r))
    code, error, _ = causes[rank]
    how = (f"was killed by {signal.Signals(-code).name}" if code < 0 else
           f"exited with code {code}")  # a negative code is a signal's number
    why = f"\n    {error}" if error else (
        f"\nLast lines of rank {rank}:{_said(result.lines(rank), 5)}")
    return (f"rank {rank} failed: it {how}. torchrun stopped the whole job; no "
            f"process is left.{why}", rank)


def torchrun(script: str | os.PathLike, *script_args: object, nproc: int = 2,
             nnodes: int = 1, timeout: float = 120.0, threads: int = 1,
             echo: bool = True, env: dict[str, str] | None = None,
             max_restarts: int = 0) -> LaunchResult:
    """Run `script` under torchrun here, streaming `[rank N]` lines (notebooks 09-17).

    `nproc` ranks on each of `nnodes` agents (each with its own GPUs, if there are
    enough); `threads` sets OMP_NUM_THREADS and MKL_NUM_THREADS; `env` adds variables;
    `echo=False` keeps the lines unprinted; `max_restarts` is torchrun's option.
    """
    if min(nproc, nnodes, threads) < 1 or timeout <= 0 or max_restarts < 0:
        raise ValueError("torchrun needs nproc, nnodes, threads >= 1, timeout > 0 "
                         "and max_restarts >= 0")
    if not Path(script).is_file():
        raise FileNotFoundError(f"no script {str(script)!r} in {Path.cwd().name}/")
    if psutil is None:
        raise ModuleNotFoundError("torchrun() needs psutil: pip install psutil")
    shown = {"OMP_NUM_THREADS": str(threads)} if threads != 1 else {}
    typed = _commands(str(script), [str(a) for a in script_args], nproc, nnodes,
                      max_restarts, {**shown, **(env or {})})
    result = LaunchResult([shlex.join(c) for c in typed], os.urandom(8).hex())
    print(f"starting {nproc * nnodes} processes" + (f" on {nnodes} agents:\n  " if
          nnodes > 1 else ": ") + "\n  ".join(result.commands), flush=True)
    # Every torchrun reads the prefix from TORCHELASTIC_...; newer ones read PET_...
    # (--log-line-prefix-template) first, so a stray one cannot win.
    run_env = {**os.environ, TAG: result.tag, "OMP_NUM_THREADS": str(threads),
               "MKL_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1",
               **dict.fromkeys(["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE",
                                "PET_LOG_LINE_PREFIX_TEMPLATE"], "[rank ${rank}] "),
               **(_RESTART_ENV if max_restarts else {})}
    agents, t0 = [], time.monotonic()
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
            _stream(agents, result, t0 + timeout, echo)
        except KeyboardInterrupt:
            _stop(agents, result.tag)
            raise LaunchError("interrupted: stopped every process of the launch.",
                              result=result) from None
        except TimeoutError:
            alive = _stop(agents, result.tag)
            raise LaunchError(
                f"timed out after {timeout:g} s; still running: rank "
                f"{', '.join(map(str, alive)) or '(none)'}. Stopped every process of "
                "the launch. A rank that never returns is often waiting in a "
                "collective (all_reduce, barrier) that another rank never reached."
                + "".join(f"\nLast lines of rank {r}:{_said(result.lines(r), 4)}"
                          for r in alive), rank=(alive or [None])[0],
                result=result) from None
        finally:
            result.seconds = time.monotonic() - t0
        _stop(agents, result.tag)  # also ends anything a rank left running behind it
        result.returncodes = [a.returncode for a in agents]
        failures = {int(r): f for n in range(nnodes)
                    if (saved := Path(logs, f"failures{n}.json")).exists()
                    for r, f in json.loads(saved.read_text()).items()}
    if any(result.returncodes):
        message, rank = _failure(result, failures)
        raise LaunchError(message, rank=rank, result=result)
    return result
