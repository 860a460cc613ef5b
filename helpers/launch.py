"""Run `torchrun` from a notebook cell: show the command, stream each rank, stop it all.

On a failure, timeout or interrupt, psutil stops every process of the launch; a
`LaunchError` names the failed rank's exception (torchrun's error file, `@record`) or
its last lines. An interrupt raises `LaunchInterrupted`, a KeyboardInterrupt, which no
`except Exception` swallows: the lesson stops. Used by notebooks 09-16, 18 and bench/.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
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
from typing import NamedTuple

import psutil

from helpers.devices import num_gpus

__all__ = ["LaunchError", "LaunchResult", "free_port", "torchrun"]

TAG = "COURSE_LAUNCH_ID"  # inherited by every process of a launch, so none can hide
PREFIX = re.compile(r"\[rank (\d+)\] (?:\[rank\d+\]:)?(.*)")  # torchrun's, then torch's
# torchrun's own main that, when ranks fail, saves what torchrun knows of each: exit
# code, its error file's message (@record) and when that file was written. Then it
# exits at once: tearing torch down takes seconds on a busy machine. If the kernel
# that started it dies (a restart during a launch), it stops every process of it.
_AGENT = """import json, os, sys, threading, time
import psutil
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
from torch.distributed.run import main
def orphaned(parent=os.getppid(), tag=os.environ["COURSE_LAUNCH_ID"]):
    while os.getppid() == parent:  # the kernel is alive: it stops the launch itself
        time.sleep(0.5)
    for p in psutil.process_iter(["environ"]):  # killed or restarted: stop it all
        mine = (p.info["environ"] or {}).get("COURSE_LAUNCH_ID") == tag
        if mine and p.pid != os.getpid():
            try:
                p.kill()
            except psutil.Error:
                pass
    os._exit(1)
threading.Thread(target=orphaned, daemon=True).start()
try:
    main(sys.argv[1:])
except ChildFailedError as err:
    with open(os.environ["COURSE_FAILURES"], "w") as saved:
        json.dump({r: [f.exitcode, isinstance(f.message, dict) and f.message[
            "message"], os.path.isfile(f.error_file) and os.stat(f.error_file)
            .st_mtime_ns] for r, f in err.failures.items()}, saved)
    os._exit(1)  # PYTHONUNBUFFERED: nothing is left to flush
os._exit(0)
"""


class LaunchError(RuntimeError):
    """A launch failed or timed out; it stopped every process (notebook 10)."""

    def __init__(self, message: str, rank: int | None = None,
                 result: LaunchResult | None = None):
        super().__init__(message)
        self.rank, self.result = rank, result


class LaunchInterrupted(KeyboardInterrupt):
    """The learner interrupted a launch; every process of it was stopped (09-16, 18)."""

    def __init__(self, message: str, result: LaunchResult | None = None):
        super().__init__(message)
        self.result = result


@dataclass
class LaunchResult:
    """What a launch ran (`commands`, one per agent) and printed (09-16, 18)."""

    commands: list[str]
    tag: str
    output: list[tuple[int, str]] = field(default_factory=list)
    agent_output: list[str] = field(default_factory=list)  # torchrun's own lines
    returncodes: list[int | None] = field(default_factory=list)
    seconds: float = 0.0

    def lines(self, rank: int) -> list[str]:
        """Return the lines that `rank` printed, without the `[rank N]` prefix."""
        return [text for r, text in self.output if r == rank]


class _Failure(NamedTuple):
    """What torchrun saved of one failed rank (see _AGENT)."""
    exitcode: int  # negative: killed by that signal
    message: str | bool  # the error file's exception (@record), else False
    written: int | bool  # when its error file was written (ns), else False


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that nothing listens on now (notebook 09)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _commands(script: str, args: list[str], nproc: int, nnodes: int,
              max_restarts: int, env: dict[str, str]) -> list[list[str]]:
    """Return each agent's command line, as a learner would type it."""
    rendezvous, gpus = [["--standalone"]], [{}] * nnodes  # torchrun picks a free port
    after = [f"--max-restarts={max_restarts}"] if max_restarts else []
    if nnodes > 1:  # agents play machines on 127.0.0.1, each with its node rank
        rendezvous = [[f"--nnodes={nnodes}", f"--node-rank={k}"]
                      for k in range(nnodes)]
        after += ["--master-addr=127.0.0.1", f"--master-port={free_port()}"]
    if nnodes > 1 and (count := num_gpus()) >= nnodes * nproc:  # else: ranks use CPUs
        ids = os.environ.get("CUDA_VISIBLE_DEVICES", ",".join(map(str, range(count))))
        gpus = [{"CUDA_VISIBLE_DEVICES": ",".join(ids.split(",")[k * nproc:][:nproc])}
                for k in range(nnodes)]  # each agent its own GPUs, as on a machine
    return [[*(f"{k}={v}" for k, v in {**g, **env}.items()), "torchrun", *node,
             f"--nproc-per-node={nproc}", *after, script, *args]
            for node, g in zip(rendezvous, gpus, strict=True)]


def _processes(tag: str) -> dict[psutil.Process, str | None]:
    """Return the live processes that carry the launch's tag, with their RANK."""
    return {p: env.get("RANK") for p in psutil.process_iter(["environ"])
            if (env := p.info["environ"] or {}).get(TAG) == tag}  # unreadable: None


def _stop(agents: list[subprocess.Popen], tag: str) -> list[int]:
    """Kill every process of the launch, reap the agents; return the ranks that ran."""
    ranks: set[int] = set()
    for _ in range(2):  # twice: a process may have started meanwhile
        procs = _processes(tag)
        ranks |= {int(r) for r in procs.values() if r is not None}
        for p in procs:
            with contextlib.suppress(psutil.Error):
                p.kill()
        psutil.wait_procs(procs, timeout=1)
    for agent in agents:
        agent.wait()
    return sorted(ranks)


def _read(stream, result: LaunchResult, echo: bool) -> None:
    """Keep one agent's lines, each rank's apart, and echo the ranks' lines."""
    for line in (s.rstrip("\n") for s in stream):
        if not (said := PREFIX.fullmatch(line)):
            result.agent_output.append(line)
            continue
        result.output.append((int(said[1]), said[2]))
        if echo:  # one write per line, so two agents' lines never mix
            print(f"[rank {said[1]}] {said[2]}\n", end="", flush=True)


def _tail(lines: list[str], count: int) -> str:
    """Return the last `count` lines that are not traceback frames, indented."""
    kept = [s for s in lines if s.strip() and not s[:1].isspace()
            and not s.startswith("Traceback (most recent call last)")][-count:]
    return "\n    " + "\n    ".join(kept or ["(nothing)"])


def _failure(result: LaunchResult,
             failures: dict[int, _Failure]) -> tuple[str, int | None]:
    """Say which rank failed first and why; return that and the rank."""
    if not failures:
        return (f"torchrun exited with code {max(result.returncodes, key=abs)} before "
                f"any rank ran.\nIts last lines:{_tail(result.agent_output, 3)}", None)
    # Ranks that torchrun stopped (SIGTERM) are victims, not causes; of the others,
    # the first to write its error file (@record) is the cause, else the lowest rank.
    causes = {r: f for r, f in failures.items()
              if f.exitcode != -signal.SIGTERM} or failures
    rank = min(causes, key=lambda r: (not causes[r].written, causes[r].written, r))
    code, error = causes[rank].exitcode, causes[rank].message
    ended = (f"was killed by {signal.Signals(-code).name}" if code < 0 else
             f"exited with code {code}")  # a negative code is a signal's number
    why = f"\n    {error}" if error else (
        f"\nLast lines of rank {rank}:{_tail(result.lines(rank), 5)}")
    return (f"rank {rank} failed: it {ended}. torchrun stopped the whole job; no "
            f"process is left.{why}", rank)


def torchrun(script: str | os.PathLike, *script_args: object, nproc: int = 2,
             nnodes: int = 1, timeout: float = 120.0, threads: int = 1,
             echo: bool = True, env: dict[str, str] | None = None,
             max_restarts: int = 0) -> LaunchResult:
    """Run `script` under torchrun here, streaming `[rank N]` lines (09-16, 18).

    `nproc` ranks on each of `nnodes` agents (each with its own GPUs, if there are
    enough); `threads` sets OMP_NUM_THREADS and MKL_NUM_THREADS; `env` adds variables;
    `echo=False` keeps the lines unprinted; `max_restarts` is torchrun's option.
    """
    if min(nproc, nnodes, threads) < 1 or timeout <= 0 or max_restarts < 0:
        raise ValueError("torchrun needs nproc, nnodes, threads >= 1, timeout > 0 "
                         "and max_restarts >= 0")
    threads_env = {"OMP_NUM_THREADS": str(threads)} if threads != 1 else {}
    commands = _commands(str(script), list(map(str, script_args)), nproc, nnodes,
                         max_restarts, {**threads_env, **(env or {})})
    result = LaunchResult([shlex.join(c) for c in commands], os.urandom(8).hex())
    print(f"starting {nproc * nnodes} processes" + (f" on {nnodes} agents:\n  " if
          nnodes > 1 else ": ") + "\n  ".join(result.commands), flush=True)
    # The prefix: every torchrun reads TORCHELASTIC_..., newer ones PET_... first.
    # Workaround, not part of torchrun: after a restart, a rank may read a stale key
    # from the shared rendezvous store (pytorch/pytorch#135712, #167288).
    run_env = {**os.environ, TAG: result.tag, "OMP_NUM_THREADS": str(threads),
               "MKL_NUM_THREADS": str(threads), "PYTHONUNBUFFERED": "1",
               **dict.fromkeys(["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE",
                                "PET_LOG_LINE_PREFIX_TEMPLATE"], "[rank ${rank}] "),
               **({"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"} if max_restarts else {})}
    agents, readers, stopped, t0 = [], [], None, time.monotonic()
    with tempfile.TemporaryDirectory(prefix="torchrun-") as logs:
        try:
            for n, cmd in enumerate(commands):
                at = cmd.index("torchrun")  # what comes before it sets variables
                agents.append(subprocess.Popen(
                    [sys.executable, "-c", _AGENT, "--tee=3", f"--log-dir={logs}/{n}",
                     *cmd[at + 1:]], env={
                        **run_env, **dict(a.split("=", 1) for a in cmd[:at]),
                        "COURSE_FAILURES": f"{logs}/failures{n}.json"},
                    stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT, text=True, errors="replace",
                    start_new_session=True))
                readers.append(threading.Thread(target=_read, daemon=True,
                                                args=(agents[n].stdout, result, echo)))
                readers[n].start()
            while any(a.poll() is None for a in agents):
                if time.monotonic() > t0 + timeout:
                    raise TimeoutError
                time.sleep(0.05)
        except (KeyboardInterrupt, TimeoutError) as stop:  # Ctrl-C: a notebook's too
            stopped = stop
        result.seconds = time.monotonic() - t0
        while True:  # also what a rank left running behind it
            try:
                alive = _stop(agents, result.tag)
                break
            except KeyboardInterrupt as again:  # a second Ctrl-C: finish stopping first
                stopped = again
        for reader in readers:  # each pipe closes once nothing of the launch is left
            reader.join(5)
        result.returncodes = [a.returncode for a in agents]
        failures = {int(r): _Failure(*f) for n in range(nnodes)
                    if (saved := Path(logs, f"failures{n}.json")).exists()
                    for r, f in json.loads(saved.read_text()).items()}
    if isinstance(stopped, KeyboardInterrupt):  # not a LaunchError: nothing catches it
        raise LaunchInterrupted(
            "interrupted: stopped every process of the launch; this cell's results are "
            "incomplete, so run it again before the cells below.", result=result)
    if stopped:
        raise LaunchError(
            f"timed out after {timeout:g} s; still running: rank "
            f"{', '.join(map(str, alive)) or '(none)'}. Stopped every process. A rank "
            "that never returns often waits in a collective (all_reduce, barrier) that "
            "another rank never reached." + "".join(
                f"\nLast lines of rank {r}:{_tail(result.lines(r), 4)}" for r in alive),
            rank=(alive or [None])[0], result=result)
    if any(result.returncodes):
        raise LaunchError(*_failure(result, failures), result=result)
    return result
