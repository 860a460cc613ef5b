"""Show, for real, why a process must not fork after starting threads or CUDA.

    python ddp_fork_pitfall.py

`fork` copies a process's memory but only the thread that called it. A lock that
another thread held at that moment stays locked in the child forever, and CUDA's
driver state cannot be used in a forked child at all. Each demo runs in a child
that is stopped after a short wait, so this script always finishes.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import torch

WAIT = 1.0  # seconds to wait for a child before calling it stuck


def _wait_for(pid: int) -> int | None:
    """Return the child's exit status, or None if it was still running after WAIT."""
    end = time.monotonic() + WAIT
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
            time.sleep(3 * WAIT)

    threading.Thread(target=busy_helper, daemon=True).start()
    held.wait()
    pid = os.fork()
    if pid == 0:  # the child: its copy of the lock is held by a thread it lacks
        with lock:
            os._exit(0)
    code = _wait_for(pid)
    if code is None:
        return f"the child was stuck on the lock after {WAIT:g} s (deadlock); killed it"
    return f"the child finished with exit code {code}"


def fork_after_cuda_init() -> str:
    """Initialise CUDA, fork, and use CUDA in the child."""
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
    _wait_for(pid)
    return os.read(read, 4096).decode() or "the child printed nothing"


if __name__ == "__main__":
    print("fork after a thread took a lock:", fork_after_a_thread_took_a_lock())
    print("fork after CUDA initialisation:", fork_after_cuda_init())
