"""engine_guard.py: an engine that does not outlive the process that started it, even one that will not stop."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

# A "server" that ignores SIGTERM, as vLLM's server waiting for a connection to close in effect does.
STUBBORN = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(600)"

# The parent: starts the guard as a group leader, prints the guard's pid, then waits to be killed.
PARENT = (
    "import os, subprocess, sys, time; "
    "g = subprocess.Popen([sys.executable, '-m', 'robustrl_grpo.engine_guard', str(os.getpid()), sys.executable, '-c', sys.argv[1]], "
    "start_new_session=True, stdout=open(sys.argv[2], 'w')); "
    "print(g.pid, flush=True); time.sleep(600)"
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def _group(pgid: int) -> list:
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and _pgid(int(p)) == pgid]


def _pgid(pid: int) -> int:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return -1


def test_the_engine_dies_with_its_parent_even_if_it_ignores_sigterm(tmp_path: Path) -> None:
    out = tmp_path / "engine.out"
    parent = subprocess.Popen([sys.executable, "-c", PARENT, STUBBORN, str(out)], stdout=subprocess.PIPE, text=True)
    guard = int(parent.stdout.readline())
    deadline = time.monotonic() + 30
    while "up" not in (out.read_text() if out.exists() else "") and time.monotonic() < deadline:
        time.sleep(0.1)
    members = _group(guard)
    assert len(members) >= 2, "the guard and its engine share the guard's process group"
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 20
    while any(_alive(p) for p in members) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(p) for p in members), "the engine outlived its parent"


def test_usage_is_refused() -> None:
    assert subprocess.run([sys.executable, "-m", "robustrl_grpo.engine_guard", "x"], capture_output=True).returncode == 2
