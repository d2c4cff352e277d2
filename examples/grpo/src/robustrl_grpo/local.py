"""The job without a control plane: one vLLM engine and ``torchrun`` trainer ranks on this machine.

It is the job's own baseline (what it does with nothing to protect it) and how its parts are tested:
the engine is started from the base model, the ranks train ``steps`` steps, and each new version is
loaded into the engine in place before the next batch is sampled (synchronous, on-policy).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Callable, Dict, List, Optional

from .config import JobConfig
from .engine import engine_command, engine_env
from .ledger import Ledger
from .model import make_base_model

__all__ = ["run_local", "free_port", "wait_healthy", "EngineProcess"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, process: Optional[subprocess.Popen] = None, timeout: float = 300.0) -> float:
    started = time.monotonic()
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    while time.monotonic() - started < timeout:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the engine exited with {process.returncode} before it was healthy")
        try:
            with opener.open(url + "/health", timeout=2) as response:
                if response.status == 200:
                    return time.monotonic() - started
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"the engine at {url} was not healthy within {timeout:.0f} s")


class EngineProcess:
    """A vLLM engine in its own process group (its API server, engine core and worker go together)."""

    def __init__(self, model_dir: str, log_path: Path, port: int = 0, die_with_parent: bool = False) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(log_path, "ab")
        command = engine_command(model_dir, self.port)
        if die_with_parent:  # ended with this process, however it ends (engine_guard.py)
            command = [sys.executable, "-m", "robustrl_grpo.engine_guard", str(os.getpid()), *command]
        self.process = subprocess.Popen(command, env=engine_env(), stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def wait(self, timeout: float = 300.0) -> float:
        return wait_healthy(self.url, self.process, timeout)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()


def ensure_model(model_dir: Path, log: Callable[[str], None]) -> None:
    if not (model_dir / "config.json").exists():
        log(f"making the base model in {model_dir}")
        make_base_model(model_dir, log=log)


def run_local(cfg: JobConfig, ranks: int = 2, log: Callable[[str], None] = print) -> Dict[str, object]:
    if not cfg.state_dir:
        raise ValueError("--state-dir is required")
    state = Path(cfg.state_dir)
    state.mkdir(parents=True, exist_ok=True)
    model_dir = Path(cfg.model_dir) if cfg.model_dir else state / "model"
    ensure_model(model_dir, log)
    engine = EngineProcess(str(model_dir), state / "engine.log")
    try:
        log(f"engine starting at {engine.url} (log: {state / 'engine.log'})")
        log(f"engine healthy after {engine.wait():.0f} s")
        run = replace(cfg, model_dir=str(model_dir), engine_url=engine.url)
        command: List[str] = [
            sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(ranks),
            "--master-addr", "127.0.0.1", "--master-port", str(free_port()), "-m", "robustrl_grpo", "trainer",
        ]  # fmt: skip
        preempted_before = len(Ledger(cfg.state_dir).records("preempted"))
        ranks_process = subprocess.Popen(command, env={**os.environ, **run.to_env(), "OMP_NUM_THREADS": "1"})
        # A SIGTERM to the job goes to torchrun, which passes it to every rank (preemption.py).
        previous = signal.signal(signal.SIGTERM, lambda signum, frame: ranks_process.send_signal(signal.SIGTERM))
        try:
            code = ranks_process.wait()
        finally:
            signal.signal(signal.SIGTERM, previous)
        preempted = Ledger(cfg.state_dir).records("preempted")[preempted_before:]
        if preempted:
            log(f"preempted after step {preempted[0]['step']}; run again over {cfg.state_dir} to resume at step {preempted[0]['step'] + 1}")
        elif code != 0:
            raise RuntimeError(f"the trainer ranks exited with {code}")
    finally:
        engine.stop()
    evals = Ledger(cfg.state_dir).records("eval")
    # The step this run was preempted after (None: it ran to the end).
    return {"evals": [(r["step"], r["passRate"]) for r in evals], "preempted": preempted[0]["step"] if preempted else None}
