"""Client for the robustrl agent's local HTTP API, for trainers and rollout workers written in Python.

Standard library only (urllib, json), Python >= 3.8: copy this file and the ``robustrl_agent_*.py``
modules beside it (argument checks, transport, weight calls) next to your training code. The agent
runs on every GPU machine of the job; this client tells it what the role is doing (phase, step
boundaries, checkpoints, rollout throughput, GPU activity, errors) so the detector can tell a hang
from a phase that legitimately has no GPU activity.

A trainer must never crash because its agent is briefly unreachable: by default every failure is
logged (logger ``robustrl_agent``) and the method returns None. Pass ``raise_on_error=True`` to get
an ``AgentError`` instead. Invalid arguments (an unknown phase, a negative step) always raise
ValueError: that is a bug in the caller, better found on the first call than hidden in a log.
"""

import contextlib
import logging
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence

from robustrl_agent_checks import (  # noqa: F401 (the constants are re-exported)
    MAX_DETAIL_CHARS,
    TRACEBACK_FRAMES,
    _command_path,
    _count,
    _describe_exception,
    _is_integer,
    _is_number,
    _non_negative,
    _positive,
    _step,
    _text,
    _truncate,
    _unit,
)
from robustrl_agent_transport import (  # noqa: F401 (the constants are re-exported)
    AGENT_TOKEN_ENV,
    AGENT_URL_ENV,
    DEFAULT_AGENT_URL,
    UNIX_SCHEME,
    AgentError,
)
from robustrl_agent_weights import MAX_TENSOR_NAME_CHARS, TENSOR_DTYPE_BYTES, WeightCalls  # noqa: F401 (the constants are re-exported)

__all__ = [
    "AgentClient",
    "AgentError",
    "DEFAULT_AGENT_URL",
    "AGENT_URL_ENV",
    "AGENT_TOKEN_ENV",
    "PHASES",
    "ERROR_SIGNALS",
]

# Only "training" counts toward the detector's trainer idle window; the other phases have no
# TensorCore activity by nature, so announcing them keeps a healthy pause from looking like a hang.
PHASES = (
    "initializing",
    "training",
    "context-switch",
    "weight-update",
    "advantage",
    "checkpoint",
    "rollout",
    "awaiting-tools",
    "idle",
)

# "process-exited" is also a fault signal: the agent observes it itself when it supervises the role;
# a framework in cooperate mode reports it with ``process_exited``.
ERROR_SIGNALS = ("step-exception", "ecc-error", "xid-error", "node-draining")

# The longest long poll the agent serves (GET /v1/commands?waitMs=…).
MAX_COMMAND_WAIT_S = 30.0

logger = logging.getLogger("robustrl_agent")


class AgentClient(WeightCalls):
    """Talks to the agent on this machine.

    :param url: the agent's base URL; default ``$ROBUSTRL_AGENT_URL``, else ``http://127.0.0.1:8086``.
    :param timeout: seconds per request. Kept short: a training step waits on every report.
    :param raise_on_error: raise ``AgentError`` on failure instead of logging and returning None.
    :param token: the agent's bearer token; default ``$ROBUSTRL_AGENT_TOKEN``, else none (an agent on
        loopback without ``ROBUSTRL_HTTP_TOKENS`` asks for none).
    """

    # -- reports ------------------------------------------------------------------------------

    def phase(self, phase: str, step: int) -> Optional[Dict[str, Any]]:
        """The role entered ``phase`` at ``step``; detection rules depend on the phase."""
        if phase not in PHASES:
            raise ValueError("unknown phase {!r}; expected one of: {}".format(phase, ", ".join(PHASES)))
        return self._post("/v1/phase", {"phase": phase, "step": _step(step)})

    def step_begin(self, step: int, batch_id: str) -> Optional[Dict[str, Any]]:
        return self._post("/v1/steps/begin", {"step": _step(step), "batchId": _text("batch_id", batch_id)})

    def step_end(self, step: int, batch_id: str, duration_ms: int) -> Optional[Dict[str, Any]]:
        return self._post(
            "/v1/steps/end",
            {"step": _step(step), "batchId": _text("batch_id", batch_id), "durationMs": _count("duration_ms", duration_ms)},
        )

    def checkpoint_saved(self, step: int, uri: str, blocking_ms: int) -> Optional[Dict[str, Any]]:
        """A checkpoint of ``step`` is saved at ``uri``; training was blocked ``blocking_ms`` by it."""
        return self._post(
            "/v1/checkpoints",
            {"step": _step(step), "uri": _text("uri", uri), "blockingMs": _count("blocking_ms", blocking_ms)},
        )

    def throughput(
        self,
        window_seconds: float,
        tokens_per_second: float,
        completed_requests: int,
        in_flight_requests: int,
        awaiting_tools: int,
        rollout_id: Optional[str] = None,
    ) -> Optional[Dict[str, Any]]:
        """Generation throughput of a rollout instance over the last ``window_seconds``.

        ``awaiting_tools`` has no default on purpose: requests parked on tool calls make zero
        throughput healthy, and a silent 0 would let such a rollout look stalled.
        """
        body: Dict[str, Any] = {
            "windowSeconds": _positive("window_seconds", window_seconds),
            "tokensPerSecond": _non_negative("tokens_per_second", tokens_per_second),
            "completedRequests": _count("completed_requests", completed_requests),
            "inFlightRequests": _count("in_flight_requests", in_flight_requests),
            "awaitingTools": _count("awaiting_tools", awaiting_tools),
        }
        if rollout_id is not None:
            body["rolloutId"] = _text("rollout_id", rollout_id)
        return self._post("/v1/throughput", body)

    def gpu_activity(
        self, tensor_active: float, interval_seconds: Optional[float] = None, per_gpu: Optional[Sequence[float]] = None
    ) -> Optional[Dict[str, Any]]:
        """TensorCore activity (0..1) measured by the framework, for machines without DCGM/nvidia-smi.

        The agent answers 409 when it reads activity from hardware itself.
        """
        body: Dict[str, Any] = {"tensorActive": _unit("tensor_active", tensor_active)}
        if interval_seconds is not None:
            body["intervalSeconds"] = _positive("interval_seconds", interval_seconds)
        if per_gpu is not None:
            if isinstance(per_gpu, (str, bytes)) or not hasattr(per_gpu, "__iter__"):
                raise ValueError("per_gpu must be a sequence of numbers in 0..1, got {!r}".format(per_gpu))
            body["perGpu"] = [_unit("per_gpu[{}]".format(i), value) for i, value in enumerate(per_gpu)]
        return self._post("/v1/gpu-activity", body)

    def error(self, signal: str, detail: str, departs_in_s: Optional[float] = None) -> Optional[Dict[str, Any]]:
        """An explicit fault (``step-exception``, ``ecc-error``, ``xid-error``, or ``node-draining``: the
        machine's node is being drained); the detector confirms it at once. ``departs_in_s``: a notice's
        time left (a drain's or a preemption's deadline), seconds from now."""
        if signal not in ERROR_SIGNALS:
            raise ValueError("unknown error signal {!r}; expected one of: {}".format(signal, ", ".join(ERROR_SIGNALS)))
        if not isinstance(detail, str):
            raise ValueError("detail must be a string, got {!r}".format(detail))
        body: Dict[str, Any] = {"signal": signal, "detail": _truncate(detail)}
        if departs_in_s is not None:
            body["departsInSeconds"] = _non_negative("departs_in_s", departs_in_s)
        return self._post("/v1/errors", body)

    def status(self) -> Optional[Dict[str, Any]]:
        """The agent's view: machineId, role, jobId, phase, step, roleProcess, gpuActivitySource."""
        return self._request("GET", "/v1/status", None)

    # -- cooperate mode: the framework owns its processes and follows the agent's commands ---------

    def commands(self, wait_s: float = 25.0) -> Optional[List[Dict[str, Any]]]:
        """Cooperate mode (agent with ``ROBUSTRL_INTEGRATION=cooperate``): the commands not acknowledged
        yet, oldest first; with none, waits up to ``wait_s`` seconds (at most 30) for one. Each is a dict
        with ``commandId``, ``type`` (``RestartTrainerGroup``, ``RestartRolloutEngine``,
        ``PromoteRolloutToTrainer``, ``StopRole``) and what carrying it out takes
        (docs/integrators/integrate-your-job.md). The request may take ``wait_s`` longer than this client's ``timeout``."""
        if not _is_number(wait_s) or not 0 <= wait_s <= MAX_COMMAND_WAIT_S:
            raise ValueError("wait_s must be a number in 0..{}, got {!r}".format(MAX_COMMAND_WAIT_S, wait_s))
        answer = self._request("GET", "/v1/commands?waitMs={}".format(int(wait_s * 1000)), None, timeout=self.timeout + wait_s)
        if answer is None:
            return None
        commands = answer.get("commands")
        return [c for c in commands if isinstance(c, dict)] if isinstance(commands, list) else []

    def acknowledge(self, command_id: str) -> Optional[Dict[str, Any]]:
        """The framework has the command: the agent offers it no more (until then, every poll does)."""
        return self._post(_command_path(command_id, "ack"), {})

    def report_outcome(self, command_id: str, error: Optional[str] = None) -> Optional[Dict[str, Any]]:
        """The command was carried out (``error`` None), or could not be (``error`` says why): what the
        agent answers the controller. The same outcome twice is taken once."""
        if error is None:
            body: Dict[str, Any] = {"outcome": "succeeded"}
        else:
            if not isinstance(error, str) or not error.strip():
                raise ValueError("error must be a non-empty string, got {!r}".format(error))
            body = {"outcome": "failed", "error": _truncate(error)}
        return self._post(_command_path(command_id, "outcome"), body)

    def process_exited(self, detail: str, exit_code: Optional[int] = None) -> Optional[Dict[str, Any]]:
        """Cooperate mode: a process of the role died (a worker actor, an engine); the detector
        confirms it at once and the controller restarts the role."""
        if not isinstance(detail, str):
            raise ValueError("detail must be a string, got {!r}".format(detail))
        if exit_code is not None and not _is_integer(exit_code):
            raise ValueError("exit_code must be an integer or None, got {!r}".format(exit_code))
        return self._post("/v1/errors", {"signal": "process-exited", "detail": _truncate(detail), "exitCode": exit_code})

    # -- after a restart by the controller: what to resume with -----------------------------------

    def restart_context(self) -> Optional[Dict[str, Any]]:
        """Trainer, after the controller restarted the group: ``{recoveryId, commandId, step,
        checkpointStep, keepBatch, batchId, group}`` — the step to retry, the checkpoint to reload, the
        batch it keeps, and ``group``: ``{rank, worldSize, members, masterAddr, masterPort}`` (members
        in rank order; the group meets at rank 0's host). The same values are in the process's
        environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ROBUSTRL_BATCH_ID). None when this
        machine was never restarted (HTTP 404)."""
        return self._get_or_none("/v1/restart")

    def launch(self) -> Optional[Dict[str, Any]]:
        """A trainer launcher, before it starts its processes: ``{group, env, restart}`` — the group
        (``rank``, ``worldSize``, ``members``, ``masterAddr``, ``masterPort``) of the last group restart,
        else of the first launch (the agent forms it once ``ROBUSTRL_TRAINER_WORLD_SIZE`` trainers
        registered), ``env`` as a launcher sets it (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, and after
        a restart the step and checkpoint to resume from), ``restart`` as ``restart_context``. None while
        the group gathers (HTTP 503); an agent that forms no group answers 404."""
        try:
            return self._send("GET", "/v1/launch", None)
        except AgentError as err:
            if err.status == 503:
                return None
            if self.raise_on_error:
                raise
            self._log_failure(err)
            return None

    def kept_batch(self, current_weight_version: int, max_staleness: int) -> Optional[Dict[str, Any]]:
        """Trainer, after a restart: the kept batch's completed trajectories, with their turns, from the
        request manager — only those within ``max_staleness`` versions of ``current_weight_version``
        (``stale`` lists the others). Retry the step on them instead of generating the batch again.
        None when there is no restart or it kept no batch (HTTP 404)."""
        query = "currentWeightVersion={}&maxStaleness={}".format(_count("current_weight_version", current_weight_version), _count("max_staleness", max_staleness))
        return self._get_or_none("/v1/restart/batch?" + query)

    @contextlib.contextmanager
    def training_step(self, step: int, batch_id: str) -> Iterator[None]:
        """Wraps one training step: reports phase ``training`` and the step's begin, then its end
        with the measured duration; or, when the body raises, reports a ``step-exception`` and
        re-raises (the robust trainer of the paper wraps its step in try/except).

        A failure to report never replaces the step's own exception, even with ``raise_on_error``.
        KeyboardInterrupt and SystemExit are not reported: stopping a trainer is not a fault.
        """
        step = _step(step)
        batch_id = _text("batch_id", batch_id)
        self.phase("training", step)
        self.step_begin(step, batch_id)
        started = time.monotonic()
        try:
            yield
        except Exception as exc:
            try:
                self.error("step-exception", _describe_exception(exc, step, batch_id))
            except AgentError as report_failure:
                logger.warning("could not report the exception of step %s to the agent: %s", step, report_failure)
            raise
        self.step_end(step, batch_id, int(round((time.monotonic() - started) * 1000)))
