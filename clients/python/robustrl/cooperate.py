"""Follow the agent's commands from a framework that owns its processes (the agent's cooperate mode).

With ``ROBUSTRL_INTEGRATION=cooperate`` the agent starts and restarts nothing: it hands each of the
controller's commands to the framework (a Ray driver, a torchrun launcher) and answers the controller with
the framework's outcome (docs/integrators/integrate-your-job.md). ``CommandFollower`` is that loop::

    from robustrl import AgentClient
    from robustrl.cooperate import CommandFollower

    def carry_out(command):
        if command["type"] == "RestartRolloutEngine":
            restart_my_engine()            # raise to report a failure, with the exception as its reason
        elif command["type"] == "RestartTrainerGroup":
            relaunch_trainer(command["env"])   # RANK, WORLD_SIZE, MASTER_ADDR, … of the re-formed group

    follower = CommandFollower(AgentClient(), carry_out).start()
    …
    follower.stop()

Polling and carrying out run on two threads: a restart that takes minutes does not stop the polls, and
the agent vouches for the role only while the framework polls. Each command is acknowledged when it is
received (the agent offers it until then: at least once), handed to ``handle`` in the order received,
and answered with success when ``handle`` returns, with the exception's text when it raises.
``StopRole`` notices (the trainer fenced out, or its lease on the broker lost) expect no answer.
"""

import copy
import logging
import queue
import threading
import time
from typing import Any, Callable, Dict, Optional

from robustrl_agent import AgentClient, AgentError

__all__ = ["CommandFollower", "Command", "NO_OUTCOME"]

Command = Dict[str, Any]

# Command types that expect no outcome.
NO_OUTCOME = ("StopRole",)

logger = logging.getLogger("robustrl.cooperate")


class CommandFollower:
    """Polls ``client`` for commands and carries each out with ``handle``.

    :param client: the agent client (copied: the follower's calls raise on failure and are retried after
        ``retry_s``, as the agent may restart).
    :param handle: called with each command, one at a time; raise to report the command failed.
    :param wait_s: the long poll's wait (at most 30 s; below ``ROBUSTRL_FRAMEWORK_ATTACHED_SECONDS``).
    """

    def __init__(self, client: AgentClient, handle: Callable[[Command], None], wait_s: float = 20.0, retry_s: float = 1.0) -> None:
        if not callable(handle):
            raise ValueError("handle must be callable")
        if retry_s <= 0:
            raise ValueError("retry_s must be > 0, got {!r}".format(retry_s))
        # Its own copy that raises on failure: the follower retries, and the caller's client keeps its policy.
        self.client = copy.copy(client)
        self.client.raise_on_error = True
        self.handle = handle
        self.wait_s = wait_s
        self.retry_s = retry_s
        self._stopping = threading.Event()
        self._received: "queue.Queue[Optional[Command]]" = queue.Queue()
        self._seen: Dict[str, None] = {}
        self._threads: list = []
        # Outcomes reported, in order, for those who watch the follower (tests, logs).
        self.answered: list = []
        self._contact = time.monotonic()

    def silent_for(self) -> float:
        """Seconds since the agent last answered a poll: a framework whose agent is gone for longer than the
        agent's lease should stop its role, as a supervised process dies with its agent."""
        return time.monotonic() - self._contact

    def start(self) -> "CommandFollower":
        """Starts polling and carrying out on two daemon threads."""
        if self._threads:
            raise RuntimeError("the follower is already started")
        self._threads = [
            threading.Thread(target=self._poll_loop, name="robustrl-command-poll", daemon=True),
            threading.Thread(target=self._work_loop, name="robustrl-command-work", daemon=True),
        ]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self, timeout: Optional[float] = None) -> None:
        """Stops after the poll in flight (at most ``wait_s``) and the command being carried out."""
        self._stopping.set()
        self._received.put(None)
        for thread in self._threads:
            thread.join(timeout)

    def poll_once(self, wait_s: Optional[float] = None) -> int:
        """One poll: acknowledges and queues the commands not seen before; returns how many."""
        try:
            commands = self.client.commands(self.wait_s if wait_s is None else wait_s)
        except AgentError as err:
            logger.warning("polling the agent for commands failed (retrying in %s s): %s", self.retry_s, err)
            self._stopping.wait(self.retry_s)
            return 0
        self._contact = time.monotonic()
        fresh = 0
        for command in commands or []:
            command_id = command.get("commandId")
            if not isinstance(command_id, str):
                continue
            try:
                self.client.acknowledge(command_id)
            except AgentError as err:
                # Not acknowledged: offered again on the next poll, where it is recognised as seen.
                logger.warning("acknowledging %s failed: %s", command_id, err)
            if command_id in self._seen:
                continue
            self._seen[command_id] = None
            self._received.put(command)
            fresh += 1
        return fresh

    def carry_out(self, command: Command) -> None:
        """Runs ``handle`` on one command and reports its outcome (retried while the agent is away)."""
        command_id = command["commandId"]
        error: Optional[str] = None
        try:
            self.handle(command)
        except Exception as exc:  # the framework's failure is the command's: reported, not raised
            error = "{}: {}".format(type(exc).__name__, exc) if str(exc) else type(exc).__name__
            logger.warning("%s %s failed: %s", command.get("type"), command_id, error)
        if command.get("type") in NO_OUTCOME:
            self.answered.append((command_id, None))
            return
        while not self._stopping.is_set():
            try:
                self.client.report_outcome(command_id, error)
                self.answered.append((command_id, error))
                return
            except AgentError as err:
                if err.status is not None and err.status < 500:
                    logger.error("the agent refused the outcome of %s: %s", command_id, err)
                    return
                logger.warning("reporting the outcome of %s failed (retrying): %s", command_id, err)
                self._stopping.wait(self.retry_s)

    def _poll_loop(self) -> None:
        while not self._stopping.is_set():
            self.poll_once()

    def _work_loop(self) -> None:
        while True:
            command = self._received.get()
            if command is None or self._stopping.is_set():
                return
            self.carry_out(command)
