"""Show, for real, why a process must not fork after starting threads or CUDA.

    python ddp_fork_pitfall.py            # both demos
    python ddp_fork_pitfall.py --no-cuda  # only the lock demo (no torch import)

`fork` copies a process's memory but only the thread that called it. A lock that
another thread held at that moment stays locked in the child forever, and CUDA's
driver state cannot be used in a forked child at all. Each demo runs in a child
that is stopped after a short wait, so this script always finishes. Notebook 09 runs
it. Unlike the other scripts of this folder it stands alone: copy just this file.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

LOCK_WAIT = 0.5  # seconds to wait for the lock child before calling it stuck
CUDA_WAIT = 10.0  # the CUDA child fails at once; this only bounds a surprise


def _wait_for(pid: int, wait: float) -> int | None:
    """Return the child's exit status, or None if it was still running after `wait`."""
    end = time.monotonic() + wait
    while time.monotonic() < end:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


def fork_after_a_thread_took_a_lock() -> str:
    """Fork while a helper thread holds a lock; the child then needs that lock."""
    lock, held = threading.Lock(), threading.Event()

    def busy_helper() -> None:  # like a logging, data-loading or metrics thread
        with lock:
            held.set()
            time.sleep(3 * LOCK_WAIT)

    threading.Thread(target=busy_helper, daemon=True).start()
    held.wait()
    pid = os.fork()
    if pid == 0:  # the child: its copy of the lock is held by a thread it lacks
        with lock:
            os._exit(0)
    code = _wait_for(pid, LOCK_WAIT)
    if code is None:
        return (f"the child was stuck on the lock after {LOCK_WAIT:g} s (deadlock); "
                "killed it")
    return f"the child finished with exit code {code}"


def fork_after_cuda_init() -> str:
    """Initialise CUDA, fork, and use CUDA in the child."""
    import torch

    if not torch.cuda.is_available():
        return "skipped: no CUDA GPU here"
    torch.zeros(1, device="cuda")  # creates the CUDA context in this process
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            torch.zeros(1, device="cuda")
            message = "no error"
        except RuntimeError as err:
            message = f"RuntimeError: {str(err).splitlines()[0]}"
        os.write(write, message.encode())
        os._exit(0)
    os.close(write)
    _wait_for(pid, CUDA_WAIT)
    return os.read(read, 4096).decode() or "the child printed nothing"


if __name__ == "__main__":
    print("fork after a thread took a lock:", fork_after_a_thread_took_a_lock())
    cuda = "skipped (--no-cuda)" if "--no-cuda" in sys.argv[1:] else (
        fork_after_cuda_init())
    print("fork after CUDA initialisation:", cuda)
