"""Run `torchrun` from a notebook cell: show the command, stream each rank, stop it all.

On a failure, timeout or interrupt, psutil stops every process of the launch, and a
`LaunchError` says why: the failed rank's exception from torchrun's error file (main
decorated with `@record`), else its last lines. Used by notebooks 09-15 and bench/.
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
    for agent in (a for a in agents if a.poll() is None):  # unreaped: pid still its
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
    _, alive = psutil.wait_procs(procs, timeout=grace)
    for p in [*alive, *_processes(agents, tag)]:  # and any started meanwhile
        with contextlib.suppress(psutil.Error):
            p.kill()
    for agent in agents:
        agent.wait()
    return sorted({int(r) for r in procs.values() if r is not None})


def _stream(agents: list[subprocess.Popen], result: LaunchResult, deadline: float,
            echo: bool) -> None:
    """Print the ranks' lines as they arrive, until the agents' output has ended."""
    def read(stream) -> None:  # "[rank N] " is torchrun's prefix, "[rankN]:" torch's
        for line in (s.rstrip("\n") for s in stream):
            head, _, text = line.partition("] ")
            if head[:6] == "[rank " and head[6:].isdigit():
                rank = int(head[6:])
                result.output.append((rank, text.removeprefix(f"[rank{rank}]:")))
            else:
                result.agent_output.append(line)

    readers = [threading.Thread(target=read, args=(a.stdout,), daemon=True)
               for a in agents]
    for reader in readers:
        reader.start()
    shown = 0
    while shown < len(result.output) or any(r.is_alive() for r in readers):
        if time.monotonic() > deadline:
            raise TimeoutError
        new = result.output[shown:]
        for rank, text in new if echo else []:
            print(f"[rank {rank}] {text}", flush=True)
        shown += len(new)
        time.sleep(0.05)
    for agent in agents:  # their output has ended: let them exit
        with contextlib.suppress(subprocess.TimeoutExpired):
            agent.wait(5)


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


def torchrun(script: str | os.PathLike, *script_args: object, nproc: int = 2,
             nnodes: int = 1, timeout: float = 120.0, threads: int = 1,
             echo: bool = True, env: dict[str, str] | None = None,
             max_restarts: int = 0) -> LaunchResult:
    """Run `script` under torchrun here, streaming `[rank N]` lines (notebooks 09-15).

    `nproc` ranks on each of `nnodes` agents (each with its own GPUs, if there are
    enough); `threads` sets OMP_NUM_THREADS and MKL_NUM_THREADS; `env` adds variables;
    `echo=False` keeps the lines unprinted; `max_restarts` is torchrun's option.
    """
    if nproc < 1 or nnodes < 1 or timeout <= 0 or threads < 1 or max_restarts < 0:
        raise ValueError("torchrun needs nproc, nnodes, threads >= 1, timeout > 0 "
                         "and max_restarts >= 0")
    if not Path(script).is_file():
        raise FileNotFoundError(f"no script {str(script)!r} in {Path.cwd().name}/")
    if psutil is None:
        raise ModuleNotFoundError("torchrun() needs psutil: pip install psutil")
    args = [str(a) for a in script_args]
    for flag, path in zip(args, args[1:], strict=False):
        if flag == "--dump":  # the launch writes it anew, or no later cell reads it
            Path(path).unlink(missing_ok=True)
    typed = _commands(str(script), args, nproc, nnodes, max_restarts, {
        **({"OMP_NUM_THREADS": str(threads)} if threads != 1 else {}), **(env or {})})
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
            raise LaunchError("interrupted: stopped every process of the launch."
                             , result=result) from None
        except TimeoutError:
            alive = _stop(agents, result.tag)
            last = "".join(f"\nLast lines of rank {r}:{_said(result.lines(r), 4)}"
                           for r in alive)
            raise LaunchError(
                f"timed out after {timeout:g} s; still running: rank "
                f"{', '.join(map(str, alive)) or '(none)'}. Stopped every process of "
                "the launch. A rank that never returns is often waiting in a "
                "collective (all_reduce, barrier) that another rank never reached."
                + last, rank=(alive or [None])[0], result=result) from None
        finally:
            result.seconds = time.monotonic() - t0
        _stop(agents, result.tag)  # also ends anything a rank left running behind it
        result.returncodes = [a.returncode for a in agents]
        failures = {int(r): f for n in range(nnodes)
                    if (saved := Path(logs, f"failures{n}.json")).exists()
                    for r, f in json.loads(saved.read_text()).items()}
    if any(result.returncodes):
        said, why, rank = _failure(result, failures)
        raise LaunchError(said + why, rank=rank, result=result)
    return result
