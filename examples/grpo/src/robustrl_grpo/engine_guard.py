"""``python -m robustrl_grpo.engine_guard PARENT_PID COMMAND...``: run an engine that does not outlive
the process that started it (an engine actor, ray_actors.py).

The guard runs ``COMMAND`` in its own process group (the caller starts the guard as a group leader) and
ends the whole group — the vLLM server, its engine core, its workers — when ``PARENT_PID`` dies, however
it dies: the kernel tells the guard (``PR_SET_PDEATHSIG``). A SIGTERM gets the same treatment. The server
is given a few seconds to stop and then killed: vLLM's server waits for its open connections to close
before it exits, and a router's request on a dead engine never closes, so a server only asked to stop
may live on for good, holding its port and memory.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from typing import List, Optional

__all__ = ["main", "GRACE_SECONDS"]

GRACE_SECONDS = 5.0
_PR_SET_PDEATHSIG = 1


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2 or not args[0].isdigit():
        print("usage: python -m robustrl_grpo.engine_guard PARENT_PID COMMAND...", file=sys.stderr)
        return 2
    parent = int(args[0])
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # the parent died before the request above took effect
        return 1
    child = subprocess.Popen(args[1:])

    def end(signum: int, frame: object) -> None:
        child.terminate()
        try:
            child.wait(timeout=GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            pass
        os.killpg(os.getpgid(0), signal.SIGKILL)  # the server's own children included, and this guard

    signal.signal(signal.SIGTERM, end)
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())
