"""torchrun under robustrl: a launcher that gets the machine's rank, the group's size and its rendezvous
from the agent, on the first launch and after every restart, and runs ``torchrun`` with them.

    python -m robustrl.torchrun --nproc-per-node 8 -- train.py --lr 1e-5

The agent runs in cooperate mode (``ROBUSTRL_INTEGRATION=cooperate``) with ``ROBUSTRL_TRAINER_WORLD_SIZE``
set to the number of trainer machines: robustrl's ranks count machines (torchrun's node rank), torchrun
starts ``--nproc-per-node`` processes on each (their ``RANK`` = node rank × nproc + local rank, their
``WORLD_SIZE`` = machines × nproc, as torchrun sets them). The launcher:

- waits for the group (``GET /v1/launch``: the first launch's, or the last restart's), then starts
  ``torchrun --nnodes W --node-rank R --nproc-per-node P --master-addr A --master-port M
  --max-restarts 0 <script> …`` with the group's environment (``ROBUSTRL_RETRY_STEP``,
  ``ROBUSTRL_RESUME_FROM_CHECKPOINT_STEP`` after a restart);
- follows the agent's commands (robustrl.cooperate): a group restart stops torchrun and starts it again
  as the command's group says; a stop notice stops it; a promotion stops it until the group restart;
- reports a torchrun that failed (a worker died: torchrun's own restarts are off, robustrl decides) as
  ``process-exited``; one that finished (exit 0) ends the launcher with 0: the job is done;
- stops torchrun when it is stopped (SIGTERM, SIGINT), and when its agent has not answered for
  ``--orphan-after`` seconds (60): a supervised trainer dies with its agent, and the control plane may be
  starting its replacement — exit code 3 then.
"""

import argparse
import copy
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Sequence

from robustrl_agent import AgentClient, AgentError

from robustrl.cooperate import CommandFollower

__all__ = ["TorchrunLauncher", "torchrun_command", "main"]

logger = logging.getLogger("robustrl.torchrun")


def torchrun_command(torchrun: Sequence[str], group: Dict[str, Any], nproc_per_node: int, script: Sequence[str]) -> List[str]:
    """The torchrun command line for this machine's place in ``group`` (static rendezvous at rank 0's host)."""
    if group.get("masterAddr") is None:
        raise ValueError("the group has no rendezvous address: rank 0's agent registered none (ROBUSTRL_ADVERTISE_HOST)")
    return list(torchrun) + [
        "--nnodes={}".format(int(group["worldSize"])),
        "--node-rank={}".format(int(group["rank"])),
        "--nproc-per-node={}".format(int(nproc_per_node)),
        "--master-addr={}".format(group["masterAddr"]),
        "--master-port={}".format(int(group["masterPort"])),
        # A failed worker is robustrl's to act on (it restarts the whole group, with the checkpoint to resume).
        "--max-restarts=0",
    ] + list(script)


class TorchrunLauncher:
    """Runs torchrun for this machine as the agent says; see the module's doc."""

    def __init__(
        self,
        client: AgentClient,
        script: Sequence[str],
        nproc_per_node: int = 1,
        torchrun: Sequence[str] = (sys.executable, "-m", "torch.distributed.run"),
        stop_grace_s: float = 15.0,
        launch_poll_s: float = 1.0,
    ) -> None:
        if nproc_per_node < 1:
            raise ValueError("nproc_per_node must be >= 1, got {!r}".format(nproc_per_node))
        if not script:
            raise ValueError("no training script given")
        # Its own copy that raises: a launcher that cannot reach its agent says so rather than start blind.
        self.client = copy.copy(client)
        self.client.raise_on_error = True
        self.script = list(script)
        self.nproc_per_node = nproc_per_node
        self.torchrun = list(torchrun)
        self.stop_grace_s = stop_grace_s
        self.launch_poll_s = launch_poll_s
        self._lock = threading.Lock()
        self._process: Optional[subprocess.Popen] = None
        self._stopping = False
        self.finished = threading.Event()
        self.launches: List[Dict[str, Any]] = []

    def wait_for_group(self) -> Dict[str, Any]:
        """The launch (``{group, env, restart}``) once the agent has a group; says every 10 s what it waits for."""
        said = 0.0
        while True:
            try:
                answer = self.client.launch()
                if answer is not None:
                    return answer
                reason = "the group is not formed yet"
            except AgentError as err:
                if err.status == 404:
                    raise
                reason = str(err)
            if time.monotonic() - said > 10:
                said = time.monotonic()
                logger.info("waiting for the trainer group: %s", reason)
            time.sleep(self.launch_poll_s)

    def start(self, launch: Dict[str, Any]) -> None:
        """Starts torchrun as ``launch`` says (its own process group, so a stop takes every worker)."""
        command = torchrun_command(self.torchrun, launch["group"], self.nproc_per_node, self.script)
        env = dict(os.environ, **{k: str(v) for k, v in launch.get("env", {}).items()})
        with self._lock:
            self._stop_locked()
            process = subprocess.Popen(command, env=env, start_new_session=True)
            self._process = process
            self.launches.append({"pid": process.pid, "group": launch["group"], "command": command})
        logger.info("torchrun started (pid %s) as node %s of %s", process.pid, launch["group"]["rank"], launch["group"]["worldSize"])
        threading.Thread(target=self._watch, args=(process,), name="robustrl-torchrun-watch", daemon=True).start()

    def handle(self, command: Dict[str, Any]) -> None:
        """A command of the agent's (robustrl.cooperate): raise to report it failed."""
        kind = command.get("type")
        if kind == "RestartTrainerGroup":
            restart = command["restart"]
            self.start({"group": restart["group"], "env": command.get("env", {}), "restart": restart})
        elif kind in ("StopRole", "PromoteRolloutToTrainer"):
            with self._lock:
                self._stop_locked()
        else:
            raise RuntimeError("{} is not a trainer launcher's to carry out".format(kind))

    def stop(self) -> None:
        with self._lock:
            self._stop_locked()

    def _stop_locked(self) -> None:
        process = self._process
        if process is None or process.poll() is not None:
            self._process = None
            return
        self._stopping = True
        try:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(self.stop_grace_s)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        except ProcessLookupError:
            pass
        finally:
            self._process = None
            self._stopping = False

    def _watch(self, process: subprocess.Popen) -> None:
        code = process.wait()
        with self._lock:
            if process is not self._process or self._stopping:
                return
            self._process = None
        if code == 0:
            logger.info("torchrun finished (exit code 0): the job is done")
            self.finished.set()
            return
        detail = "torchrun (pid {}) exited with code {}: a worker failed".format(process.pid, code)
        logger.warning(detail)
        self.client.process_exited(detail, exit_code=128 - code if code < 0 else code)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m robustrl.torchrun", description=__doc__.split("\n\n")[0])
    parser.add_argument("--nproc-per-node", type=int, default=1, help="processes per machine (torchrun's --nproc-per-node)")
    parser.add_argument("--torchrun", default=None, help="the torchrun command (default: this Python's torch.distributed.run)")
    parser.add_argument("--orphan-after", type=float, default=60.0, help="seconds without the agent after which torchrun is stopped (default 60)")
    parser.add_argument("script", nargs=argparse.REMAINDER, help="-- the training script and its arguments")
    args = parser.parse_args(argv)
    script = args.script[1:] if args.script[:1] == ["--"] else args.script
    if not script:
        parser.error("give the training script after --")
    logging.basicConfig(level=logging.INFO, format="[robustrl.torchrun] %(message)s")
    torchrun = args.torchrun.split() if args.torchrun else [sys.executable, "-m", "torch.distributed.run"]
    client = AgentClient()
    launcher = TorchrunLauncher(client, script, nproc_per_node=args.nproc_per_node, torchrun=torchrun)
    follower = CommandFollower(client, launcher.handle).start()
    # A stop of the launcher is a stop of its torchrun (the finally below), not an orphaned group.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        launcher.start(launcher.wait_for_group())
        while not launcher.finished.wait(1.0):
            if follower.silent_for() > args.orphan_after:
                logger.error("no answer from the agent for %.0f s: stopping torchrun rather than train unsupervised", follower.silent_for())
                return 3
        return 0
    except KeyboardInterrupt:
        return 130
    finally:
        follower.stop(timeout=5)
        launcher.stop()


if __name__ == "__main__":
    sys.exit(main())
