"""Every point-to-point exchange in the course, replayed as nccl would run it.

nccl runs one rank's sends and receives to a peer one after another, in the order the
rank called them, on one stream, and a send ends only when its receive runs (unless
nccl happens to buffer the message). gloo buffers, so a CPU run cannot show an order
that hangs on GPUs. So the scripts run here under gloo with a recorder around
torch.distributed's send, recv, isend, irecv, batch_isend_irecv, Work.wait and the
collectives, and `replay` runs each rank's recorded calls again, offline, under
rendezvous semantics: a rank's calls post its operations in order; a blocking call,
a collective or a wait() holds the rank until its operation is done; an operation
is done when it meets its match at the head of both ranks' queues (a
batch_isend_irecv is one entry, whose operations meet their matches in any order; a
collective needs every rank of its group). `replay` says where each rank was stuck.

Run as a script, this file is the recorder: `python test_p2p_order.py DIR SCRIPT ...`
runs SCRIPT with its arguments and writes each rank's calls to DIR/rank{R}.json.
"""

from __future__ import annotations

import atexit
import functools
import inspect
import json
import os
import runpy
import sys
from dataclasses import dataclass, field
from pathlib import Path

P2P = {"send": ("send", True), "recv": ("recv", True), "isend": ("send", False),
       "irecv": ("recv", False)}
COLLECTIVES = ["barrier", "broadcast", "all_reduce", "reduce", "all_gather",
               "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
               "all_to_all", "all_to_all_single", "gather", "scatter",
               "all_gather_object", "broadcast_object_list", "gather_object",
               "scatter_object_list"]


# ---------------------------------------------------------------- the recorder ----

def _caller() -> str:
    """Return file:line of the first frame outside torch and this file."""
    frame = sys._getframe(2)
    while frame and ("torch" + os.sep in frame.f_code.co_filename
                     or frame.f_code.co_filename == __file__):
        frame = frame.f_back
    return f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno}" if frame else "?"


def install(out: Path) -> None:
    """Wrap torch.distributed's p2p calls and collectives; save the calls at exit."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    calls: list[dict] = []
    depth = [0]  # calls made inside a recorded call (send calls isend) are not new

    def log(entry: dict) -> int:
        entry["at"] = _caller()
        calls.append(entry)
        return len(calls) - 1

    class Work:  # the real Work, whose wait() is recorded
        def __init__(self, work, ident: int):
            self._work, self._id = work, ident

        def wait(self, *args, **kwargs):
            if not depth[0]:
                log({"op": "wait", "id": self._id})
            return self._work.wait(*args, **kwargs)

        def __getattr__(self, name):
            return getattr(self._work, name)

    def peer_of(bound: inspect.BoundArguments, key: str) -> int:
        args = bound.arguments
        if args.get(key) is not None:
            return int(args[key])
        return dist.get_global_rank(args["group"], args[f"group_{key}"])

    def nested(fn, *args, **kwargs):
        depth[0] += 1
        try:
            return fn(*args, **kwargs)
        finally:
            depth[0] -= 1

    def p2p(name: str, fn):
        kind, blocking = P2P[name]
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if depth[0]:
                return fn(*args, **kwargs)
            bound = signature.bind(*args, **kwargs)
            tensor = bound.arguments["tensor"]
            ident = log({"op": kind, "blocking": blocking,
                         "peer": peer_of(bound, "dst" if kind == "send" else "src"),
                         "bytes": tensor.numel() * tensor.element_size()})
            result = nested(fn, *args, **kwargs)
            return result if blocking or result is None else Work(result, ident)
        return wrapper

    def batch(fn):
        @functools.wraps(fn)
        def wrapper(ops):
            if depth[0]:
                return fn(ops)
            ident = log({"op": "batch", "ops": [
                {"op": "send" if op.op.__name__ == "isend" else "recv",
                 "peer": op.peer if op.peer is not None else
                 dist.get_global_rank(op.group, op.group_peer),
                 "bytes": op.tensor.numel() * op.tensor.element_size()}
                for op in ops]})
            return [Work(work, ident) for work in nested(fn, ops)]
        return wrapper

    def collective(name: str, fn):
        signature = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            if depth[0]:
                return fn(*args, **kwargs)
            group = signature.bind(*args, **kwargs).arguments.get("group")
            log({"op": "collective", "name": name,
                 "ranks": dist.get_process_group_ranks(group) if group is not None
                 else list(range(dist.get_world_size()))})
            return nested(fn, *args, **kwargs)
        return wrapper

    wrapped = {name: p2p(name, getattr(c10d, name)) for name in P2P}
    wrapped["batch_isend_irecv"] = batch(c10d.batch_isend_irecv)
    wrapped.update({name: collective(name, getattr(c10d, name))
                    for name in COLLECTIVES})
    for name, wrapper in wrapped.items():  # the module's own calls and dist.* alike
        setattr(c10d, name, wrapper)
        setattr(dist, name, wrapper)

    def save():
        if dist.is_initialized() or calls:
            rank = int(os.environ.get("RANK", "0"))
            (out / f"rank{rank}.json").write_text(json.dumps(calls))
    atexit.register(save)


def record_main(argv: list[str]) -> None:
    """Run the script argv[1] with arguments argv[2:], recording into folder argv[0]."""
    out, script, *args = argv
    install(Path(out))
    sys.path.insert(0, str(Path(script).resolve().parent))  # its siblings import
    sys.argv = [script, *args]
    runpy.run_path(script, run_name="__main__")


# ---------------------------------------------------------------- the replayer ----

@dataclass(eq=False)  # entries compare by identity
class Entry:
    """One posted operation (a batch is one entry): its parts, and when each matched."""

    rank: int
    call: int  # its index among the rank's recorded calls
    what: str
    parts: list[dict]  # {"op": "send"/"recv", "peer", "bytes"} or one collective
    matched: list[bool] = field(default_factory=list)

    def __post_init__(self):
        self.matched = [False] * len(self.parts)

    @property
    def done(self) -> bool:
        return all(self.matched)


def _describe(calls: list[dict], k: int) -> str:
    call = calls[k]
    if call["op"] == "batch":
        ops = ", ".join(f"{o['op']} {'to' if o['op'] == 'send' else 'from'} "
                        f"{o['peer']}" for o in call["ops"])
        what = f"batch_isend_irecv [{ops}]"
    elif call["op"] == "collective":
        what = call["name"]
    elif call["op"] == "wait":
        what = f"wait() on call {call['id']}"
    else:
        name = ("" if call["blocking"] else "i") + call["op"]
        what = (f"{name} {'to' if call['op'] == 'send' else 'from'} {call['peer']} "
                f"({call['bytes']} B)")
    return f"call {k} {what} at {call.get('at', '?')}"


def replay(programs: dict[int, list[dict]], in_order: bool = True) -> str | None:
    """Replay each rank's recorded calls; return None if all finish, else who is stuck.

    `in_order=True` is nccl: only the oldest unfinished entry of a rank can meet its
    match. `in_order=False` lets every posted entry match (what gloo's buffering
    allows), keeping the order of messages between one pair of ranks.
    """
    pc = dict.fromkeys(programs, 0)  # the next call each rank makes
    holding: dict[int, Entry | None] = dict.fromkeys(programs)  # what holds a rank
    posted: dict[int, list[Entry]] = {r: [] for r in programs}
    by_call: dict[tuple[int, int], Entry] = {}
    errors: list[str] = []

    def pending(r: int) -> list[Entry]:
        return [e for e in posted[r] if not e.done]

    def open_parts(r: int, op: str, peer: int) -> list[tuple[Entry, int]]:
        return [(e, i) for e in pending(r) for i, p in enumerate(e.parts)
                if not e.matched[i] and p.get("op") == op and p.get("peer") == peer]

    def can_meet(entry: Entry) -> bool:
        return entry in (pending(entry.rank)[:1] if in_order else pending(entry.rank))

    progress = True
    while progress:
        progress = False
        for r, calls in programs.items():  # each rank calls until something holds it
            while pc[r] < len(calls) and not (holding[r] and not holding[r].done):
                call, k = calls[pc[r]], pc[r]
                pc[r] += 1
                progress = True
                if call["op"] == "wait":
                    holding[r] = by_call[(r, call["id"])]
                    continue
                parts = (call["ops"] if call["op"] == "batch" else [call])
                entry = Entry(r, k, _describe(calls, k), [dict(p) for p in parts])
                posted[r].append(entry)
                by_call[(r, k)] = entry
                if call["op"] == "collective" or call.get("blocking"):
                    holding[r] = entry
        for r in programs:  # operations meet their matches
            for entry in pending(r):
                if not can_meet(entry):
                    continue
                for i, part in enumerate(entry.parts):
                    if entry.matched[i]:
                        continue
                    if part["op"] == "collective":
                        heads = [next((e for e in pending(q)
                                       if e.parts[0]["op"] == "collective"), None)
                                 for q in part["ranks"]]
                        if all(h and can_meet(h) for h in heads):
                            names = {h.parts[0]["name"] for h in heads}
                            if len(names) > 1:
                                errors.append(f"ranks call different collectives at "
                                              f"once: {sorted(names)}")
                            for h in heads:
                                h.matched[0] = True
                            progress = True
                        continue
                    peer = part["peer"]
                    other = "recv" if part["op"] == "send" else "send"
                    if peer not in programs:
                        errors.append(f"rank {r} {entry.what}: no rank {peer}")
                        continue
                    mine = open_parts(r, part["op"], peer)
                    theirs = open_parts(peer, other, r)
                    if (not theirs or mine[0][0] is not entry or mine[0][1] != i
                            or not can_meet(theirs[0][0])):
                        continue  # not this pair's oldest message, or no match yet
                    match, j = theirs[0]
                    if match.parts[j]["bytes"] != part["bytes"]:
                        errors.append(f"rank {r} {entry.what} meets rank {peer} "
                                      f"{match.what}: sizes differ")
                    entry.matched[i] = match.matched[j] = True
                    progress = True
    stuck = [r for r in programs
             if pc[r] < len(programs[r]) or pending(r)]
    if not stuck and not errors:
        return None
    lines = errors[:]
    for r in stuck:
        held = holding[r] if holding[r] and not holding[r].done else None
        head = pending(r)[0].what if pending(r) else "nothing"
        lines.append(f"rank {r}: made {pc[r]} of {len(programs[r])} calls; "
                     + (f"held by {held.what}; " if held else "")
                     + f"oldest unfinished: {head}")
    return ("deadlock: " if stuck else "") + "\n".join(lines)


# ------------------------------------------------------------------- the tests ----
# pytest imports what follows; the recorder above needs only torch and the stdlib.

def _s(peer, nbytes=8192, blocking=False, at="?"):
    return {"op": "send", "blocking": blocking, "peer": peer, "bytes": nbytes, "at": at}


def _r(peer, nbytes=8192, blocking=False, at="?"):
    return {"op": "recv", "blocking": blocking, "peer": peer, "bytes": nbytes, "at": at}


def _w(ident):
    return {"op": "wait", "id": ident}


def _batch(*ops):
    return {"op": "batch", "ops": [{k: o[k] for k in ("op", "peer", "bytes")}
                                   for o in ops]}


# One pipeline_step with 3 micro-batches, as the recorder saw it in a run of the
# stages.py of commit d27057a (pipe_manual.py --batch 6 --splits 2): rank 0 isends
# every activation, then receives the gradients; rank 1 receives an activation,
# isends its gradient, receives the next one.
OLD_STAGES_ORDER = {
    0: [_s(1, at="stages.py:151")] * 3 + [_r(1, blocking=True, at="stages.py:154")] * 3
    + [_w(0), _w(1), _w(2)],
    1: [_r(0, blocking=True, at="stages.py:160"), _s(0, at="stages.py:165")] * 3
    + [_w(1), _w(3), _w(5)],
}


def test_replay_flags_the_old_stages_order_as_a_deadlock_on_nccl():
    said = replay(OLD_STAGES_ORDER)
    assert said and said.startswith("deadlock"), said
    # rank 1's first gradient waits behind rank 0's second activation, and vice versa
    assert "rank 0: made 4 of 9 calls; held by call 3 recv from 1" in said, said
    assert "oldest unfinished: call 1 isend to 1" in said, said
    assert "rank 1: made 3 of 9 calls; held by call 2 recv from 0" in said, said
    assert "oldest unfinished: call 1 isend to 0" in said, said
    assert replay(OLD_STAGES_ORDER, in_order=False) is None  # why gloo never hung


def test_replay_passes_the_fixed_stages_order():
    m = 3
    fixed = {0: [_s(1)] * m + [_r(1, blocking=True)] * m + [_w(i) for i in range(m)],
             1: [_r(0)] * m + [x for i in range(m) for x in (_w(i), _s(0))]
             + [_w(m + 2 * i + 1) for i in range(m)]}
    assert replay(fixed) is None


def test_replay_knows_the_classic_deadlocks_and_their_fixes():
    both_send_first = {0: [_s(1, blocking=True), _r(1, blocking=True)],
                       1: [_s(0, blocking=True), _r(0, blocking=True)]}
    assert replay(both_send_first).startswith("deadlock")
    ring = {r: [_s((r + 1) % 3, blocking=True), _r((r - 1) % 3, blocking=True)]
            for r in range(3)}
    assert replay(ring).startswith("deadlock")
    grouped = {r: [_batch(_s((r + 1) % 3), _r((r - 1) % 3)), _w(0)] for r in range(3)}
    assert replay(grouped) is None
    isend_then_recv = {r: [_s((r + 1) % 3), _r((r - 1) % 3, blocking=True), _w(0)]
                       for r in range(3)}
    assert replay(isend_then_recv).startswith("deadlock")  # nccl: one queue per rank
    assert replay(isend_then_recv, in_order=False) is None


def test_replay_flags_unmatched_and_mismatched_messages():
    lonely = {0: [_s(1), _w(0)], 1: []}
    assert "rank 0: made 2 of 2 calls; held by call 0 isend" in replay(lonely)
    sizes = {0: [_s(1, 4, blocking=True)], 1: [_r(0, 8, blocking=True)]}
    assert "sizes differ" in replay(sizes)
    barrier = {"op": "collective", "name": "barrier", "ranks": [0, 1]}
    skipped = {0: [barrier, _s(1, blocking=True)], 1: [_r(0, blocking=True)]}
    assert "held by call 0 barrier" in replay(skipped)
    assert replay({0: [barrier, _s(1, blocking=True)],
                   1: [barrier, _r(0, blocking=True)]}) is None


SCRIPTS = Path(__file__).resolve().parents[1] / "notebooks" / "scripts"
def recorded(out: Path, script: str, *args: object, nproc: int = 2):
    """Run a course script under gloo with the recorder, its results in `out`;
    return each rank's calls and the launch. Its launches live with the script's
    tests (test_stages.py, test_comm_scripts.py), which read one launch twice: the
    script's results, and `replay` of its calls."""
    from helpers.launch import torchrun

    calls = out / "calls"
    calls.mkdir()
    launch = torchrun(__file__, calls, SCRIPTS / script, "--out", out, *args,
                      nproc=nproc, echo=False, timeout=300)
    return {r: json.loads((calls / f"rank{r}.json").read_text())
            for r in range(nproc)}, launch


def count(calls: list[dict], op: str) -> int:
    """Return how many of a rank's recorded calls are (or hold) an `op`."""
    return sum(c["op"] == op or any(o["op"] == op for o in c.get("ops", ()))
               for c in calls)


if __name__ == "__main__":
    record_main(sys.argv[1:])
