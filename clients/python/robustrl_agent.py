"""Client for the robustrl agent's local HTTP API, for trainers and rollout workers written in Python.

Single module, standard library only (urllib, json), Python >= 3.8: copy this file next to your
training code. The agent runs on every GPU machine of the job; this client tells it what the role is
doing (phase, step boundaries, checkpoints, rollout throughput, GPU activity, errors) so the detector
can tell a hang from a phase that legitimately has no GPU activity.

A trainer must never crash because its agent is briefly unreachable: by default every failure is
logged (logger ``robustrl_agent``) and the method returns None. Pass ``raise_on_error=True`` to get
an ``AgentError`` instead. Invalid arguments (an unknown phase, a negative step) always raise
ValueError: that is a bug in the caller, better found on the first call than hidden in a log.
"""

import contextlib
import http.client
import json
import logging
import math
import os
import socket
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Iterator, List, Optional, Sequence

__all__ = [
    "AgentClient",
    "AgentError",
    "DEFAULT_AGENT_URL",
    "AGENT_URL_ENV",
    "AGENT_TOKEN_ENV",
    "PHASES",
    "ERROR_SIGNALS",
]

DEFAULT_AGENT_URL = "http://127.0.0.1:8086"
AGENT_URL_ENV = "ROBUSTRL_AGENT_URL"
# The agent's bearer token, when its API asks for one (ROBUSTRL_HTTP_TOKENS on the agent).
AGENT_TOKEN_ENV = "ROBUSTRL_AGENT_TOKEN"

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

# The agent rejects a longer detail (its event schema caps it at 4000 characters).
MAX_DETAIL_CHARS = 4000

# Frames kept in a step-exception report: the innermost ones, where the failure happened.
TRACEBACK_FRAMES = 5

logger = logging.getLogger("robustrl_agent")


class AgentError(Exception):
    """A call to the agent failed.

    ``status`` is the HTTP status, or None when the agent could not be reached or did not answer.
    ``message`` is the agent's own ``error`` text when it sent one; ``issues`` its list of
    ``{"path": ..., "message": ...}`` for invalid input (HTTP 400).
    """

    def __init__(
        self, method: str, path: str, message: str, status: Optional[int] = None, issues: Optional[List[Any]] = None
    ) -> None:
        self.method = method
        self.path = path
        self.message = message
        self.status = status
        self.issues = list(issues or [])
        where = "{} {}".format(method, path)
        head = "{}: HTTP {}: {}".format(where, status, message) if status is not None else "{}: {}".format(where, message)
        details = "; ".join(
            "{}: {}".format(issue.get("path", "?"), issue.get("message", "?")) if isinstance(issue, dict) else str(issue)
            for issue in self.issues
        )
        super().__init__("{} ({})".format(head, details) if details else head)


UNIX_SCHEME = "http+unix"


def _unix_url(url: str) -> str:
    """``unix:/run/robustrl/agent.sock`` (the agent's ``ROBUSTRL_AGENT_SOCKET``, shared with the framework's
    pod on its node) as the URL the opener takes: the socket's path, quoted, in the host's place."""
    path = url[len("unix:") :]
    if path.startswith("//"):
        path = path[2:]
    if not path.startswith("/"):
        raise ValueError("a unix: agent url names the socket's absolute path, got {!r}".format(url))
    return "{}://{}".format(UNIX_SCHEME, urllib.parse.quote(path, safe=""))


class _UnixConnection(http.client.HTTPConnection):
    """HTTP over the agent's Unix socket: the host part of the URL is the socket's quoted path."""

    def __init__(self, host: str, **kwargs: Any) -> None:
        super().__init__("localhost", **kwargs)
        self._socket_path = urllib.parse.unquote(host)

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if self.timeout is not socket._GLOBAL_DEFAULT_TIMEOUT:  # type: ignore[attr-defined]
            sock.settimeout(self.timeout)
        try:
            sock.connect(self._socket_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class _UnixSocketHandler(urllib.request.AbstractHTTPHandler):
    def unix_open(self, request: urllib.request.Request) -> http.client.HTTPResponse:
        return self.do_open(_UnixConnection, request)  # type: ignore[arg-type]


# urllib finds a handler's methods by the scheme's name, which has a '+' in it…
setattr(_UnixSocketHandler, UNIX_SCHEME + "_open", _UnixSocketHandler.unix_open)
setattr(_UnixSocketHandler, UNIX_SCHEME + "_request", urllib.request.AbstractHTTPHandler.do_request_)
# …and answers of 400 and above become HTTPError there too, as over http://.
setattr(_UnixSocketHandler, UNIX_SCHEME + "_response", urllib.request.HTTPErrorProcessor.http_response)


class AgentClient:
    """Talks to the agent on this machine.

    :param url: the agent's base URL; default ``$ROBUSTRL_AGENT_URL``, else ``http://127.0.0.1:8086``.
    :param timeout: seconds per request. Kept short: a training step waits on every report.
    :param raise_on_error: raise ``AgentError`` on failure instead of logging and returning None.
    :param token: the agent's bearer token; default ``$ROBUSTRL_AGENT_TOKEN``, else none (an agent on
        loopback without ``ROBUSTRL_HTTP_TOKENS`` asks for none).
    """

    def __init__(
        self, url: Optional[str] = None, timeout: float = 2.0, raise_on_error: bool = False, token: Optional[str] = None
    ) -> None:
        base = url if url is not None else os.environ.get(AGENT_URL_ENV) or DEFAULT_AGENT_URL
        if isinstance(base, str) and base.startswith("unix:"):
            base = _unix_url(base)
        if not isinstance(base, str) or not base.startswith(("http://", "https://", UNIX_SCHEME + "://")):
            raise ValueError("agent url must start with http://, https:// or unix: (its socket's path), got {!r}".format(base))
        if not _is_number(timeout) or timeout <= 0:
            raise ValueError("timeout must be a number > 0, got {!r}".format(timeout))
        secret = token if token is not None else os.environ.get(AGENT_TOKEN_ENV) or None
        if secret is not None and (not isinstance(secret, str) or not secret.strip() or any(c.isspace() for c in secret)):
            raise ValueError("token must be a non-empty string without white space")
        self._authorization = None if secret is None else "Bearer " + secret
        self.url = base.rstrip("/")
        self.timeout = float(timeout)
        self.raise_on_error = bool(raise_on_error)
        # The agent is local: never route it through an HTTP(S)_PROXY from the environment, which
        # cluster images often set for downloads and which would not know 127.0.0.1 of this machine.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _UnixSocketHandler())
        # While the agent stays unreachable, warn once and log the repeats at DEBUG: one warning per
        # step for hours would bury the trainer's own log.
        self._unreachable = False

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
        ``PromoteRolloutToTrainer``, ``StopRole``) and what carrying it out takes (README "Integrate your
        job"). The request may take ``wait_s`` longer than this client's ``timeout``."""
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

    # -- weights (paper §5.2.1): versions travel through named shared-memory regions -------------

    def publish_weights(
        self,
        version: int,
        step: int,
        shm_name: str,
        bucket_sizes: List[int],
        tensors: Optional[Sequence[Any]] = None,
        shard: Optional[int] = None,
        shards: Optional[int] = None,
    ) -> Optional[Dict[str, Any]]:
        """Trainer: version ``version`` (this rank's shard of it, with ``shard``/``shards``) lies in
        ``/dev/shm/<shm_name>``, buckets (layer groups) back to back with these sizes. The agent maps
        it, checksums each bucket and publishes the manifest. Returns ``{eventId, totalBytes, checksums}``.
        Keep the file until the version is retired.

        ``tensors``: the named tensors in those buckets — dicts ``{name, dtype, shape, bucket, offset}``
        (``bucket`` counts in ``bucket_sizes``, ``offset`` in bytes into it) or entries with ``to_json()``
        (``robustrl.named_weights.plan(...).tensors``); a rollout's engine reads them by name from the
        parts of ``latest_weights()``. ``shard``/``shards``: which of the version's publishers this is
        (one per trainer rank; the version is whole once every shard is); give both or neither."""
        if not isinstance(shm_name, str) or not shm_name or "/" in shm_name:
            raise ValueError("shm_name must be a file name in /dev/shm, got {!r}".format(shm_name))
        if not isinstance(bucket_sizes, (list, tuple)) or not bucket_sizes:
            raise ValueError("bucket_sizes must be a non-empty list of byte counts")
        sizes = [_count("bucket size", size) for size in bucket_sizes]
        body: Dict[str, Any] = {"version": _count("version", version), "step": _step(step), "shmName": shm_name, "bucketSizes": sizes}
        if tensors is not None:
            body["tensors"] = _tensors(tensors, sizes)
        if shard is not None or shards is not None:
            body["shard"] = _shard(shard, shards)
        return self._post("/v1/weights/versions", body)

    def publish_device_weights(self, version: int, step: int, buckets: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
        """Trainer: version ``version`` lies in GPU memory, one CUDA IPC handle per bucket — the dicts
        ``robustrl_weights.export_buckets`` makes (``sizeBytes``, ``handle``, ``offset``, ``device``).
        The agent copies them device to device into its own memory (pullers GET that copy over
        cuda_ipc / RDMA; UCX cannot serve memory the agent imported), serves the copy and publishes the
        manifest with sampled checksums. Keep the tensors unchanged until this returns; after that they
        are yours again. Returns ``{eventId, totalBytes, checksums}``."""
        return self._post("/v1/weights/versions", {"version": _count("version", version), "step": _step(step), "buckets": _ipc_buckets(buckets)})

    def register_weight_target(self, name: str, buckets: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
        """Rollout: GPU buffers (one per bucket, ``robustrl_weights.export_buckets``) the agent pulls
        versions into, device to device. Register two for double buffering; a version lands in a free
        one whose bucket sizes match (``latest_weights()['target']`` names it), else in /dev/shm as
        before. Registering a name again replaces it."""
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError("name must be a plain name, got {!r}".format(name))
        return self._request("PUT", "/v1/weights/targets/" + name, {"buckets": _ipc_buckets(buckets)})

    def set_engines(self, engines: Dict[str, str]) -> Optional[Dict[str, Any]]:
        """Rollout: the inference engines the framework started on this machine, ``{name: base_url}``
        (several TP=1 or TP=4 engines on one node). The machine registers again with them: the router
        routes to each as ``<machine>/<name>``, and an agent that loads versions loads each. Calling
        again replaces the list. Returns ``{engines: [{engineId, url}]}``."""
        if not isinstance(engines, dict) or not engines:
            raise ValueError("engines must be a non-empty {{name: url}} dict, got {!r}".format(engines))
        return self._request("PUT", "/v1/engines", {"engines": [{"name": str(n), "url": str(u)} for n, u in engines.items()]})

    def remove_weight_target(self, name: str) -> Optional[Dict[str, Any]]:
        """Rollout: take a target's buffers back (a version held there is no longer served)."""
        if not isinstance(name, str) or not name or "/" in name:
            raise ValueError("name must be a plain name, got {!r}".format(name))
        return self._request("DELETE", "/v1/weights/targets/" + name, None)

    def latest_weights(self) -> Optional[Dict[str, Any]]:
        """Rollout: the newest version this machine holds whole, every shard — ``{version, step, path,
        target, memoryType, totalBytes, buckets, shards, parts}``. ``parts``, one per shard in shard
        order, is what an engine loads named tensors from: ``{shard, path, shmName, target, bucketSizes,
        bucketStarts, tensors}`` (``tensors`` None for opaque bytes). A version of one shard also has
        its ``path`` (/dev/shm) or pull ``target`` at the top. None while no version is whole (HTTP 404)."""
        return self._get_or_none("/v1/weights/latest")

    def _get_or_none(self, path: str) -> Optional[Dict[str, Any]]:
        """GET where 404 means "nothing yet": None, whatever ``raise_on_error`` says."""
        try:
            return self._send("GET", path, None)
        except AgentError as err:
            if err.status == 404:
                return None
            if self.raise_on_error:
                raise
            self._log_failure(err)
            return None

    def weight_version(self, version: int) -> Optional[Dict[str, Any]]:
        """Either role: this machine's view of one version — held buckets and, for the trainer,
        ``trainerReleased`` (async mode: resume training once the first relay holds it)."""
        return self._request("GET", "/v1/weights/versions/{}".format(_count("version", version)), None)

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

    # -- transport ----------------------------------------------------------------------------

    def _post(self, path: str, body: Dict[str, Any]) -> Optional[Dict[str, Any]]:
        return self._request("POST", path, body)

    def _request(self, method: str, path: str, body: Optional[Dict[str, Any]], timeout: Optional[float] = None) -> Optional[Dict[str, Any]]:
        try:
            result = self._send(method, path, body, timeout)
        except AgentError as err:
            if self.raise_on_error:
                raise
            self._log_failure(err)
            return None
        if self._unreachable:
            logger.info("robustrl agent at %s is reachable again", self.url)
            self._unreachable = False
        return result

    def _send(self, method: str, path: str, body: Optional[Dict[str, Any]], timeout: Optional[float] = None) -> Dict[str, Any]:
        timeout = self.timeout if timeout is None else timeout
        data = None if body is None else json.dumps(body, allow_nan=False).encode("utf-8")
        headers = {"Accept": "application/json"}
        if self._authorization is not None:
            headers["Authorization"] = self._authorization
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        try:
            with self._opener.open(request, timeout=timeout) as response:
                status = response.status
                raw = response.read()
        except urllib.error.HTTPError as err:
            # HTTPError is raised for every status >= 400; its body carries the agent's explanation.
            try:
                raw = err.read()
            except OSError:
                raw = b""
            finally:
                err.close()
            answer = _json_object(raw) or {}
            message = answer.get("error") if isinstance(answer.get("error"), str) else (raw.decode("utf-8", "replace").strip()[:300] or err.reason)
            issues = answer.get("issues") if isinstance(answer.get("issues"), list) else None
            raise AgentError(method, path, str(message), status=err.code, issues=issues)
        except urllib.error.URLError as err:
            raise AgentError(method, path, "agent unreachable at {}: {}".format(self.url, err.reason))
        except (socket.timeout, TimeoutError):
            raise AgentError(method, path, "no answer from the agent at {} within {} s".format(self.url, timeout))
        except (OSError, ValueError, http.client.HTTPException) as err:
            # A connection reset mid-response, a malformed status line, an agent gone mid-answer.
            raise AgentError(method, path, "request to the agent at {} failed: {}".format(self.url, err))
        if not raw.strip():
            return {}
        answer = _json_object(raw)
        if answer is None:
            raise AgentError(method, path, "agent answered HTTP {} with a body that is not a JSON object".format(status), status=status)
        return answer

    def _log_failure(self, err: AgentError) -> None:
        if err.status is None:
            # Unreachable or timed out: expected while the agent restarts, so say it once per outage.
            level = logging.DEBUG if self._unreachable else logging.WARNING
            self._unreachable = True
            logger.log(level, "robustrl agent report failed (continuing): %s", err)
        else:
            # The agent answered and refused: a bug in the caller or a mismatch with the agent; always worth seeing.
            logger.warning("robustrl agent refused a report (continuing): %s", err)


# -- argument checks ------------------------------------------------------------------------------


def _command_path(command_id: Any, action: str) -> str:
    """A command's route: its id (which contains "/") URL-encoded as one path segment."""
    if not isinstance(command_id, str) or not command_id:
        raise ValueError("command_id must be a non-empty string, got {!r}".format(command_id))
    return "/v1/commands/{}/{}".format(urllib.parse.quote(command_id, safe=""), action)


def _ipc_buckets(buckets: Any) -> List[Dict[str, Any]]:
    """The buckets as the agent takes them, checked here so a mistake is a ValueError on the first call."""
    if not isinstance(buckets, (list, tuple)) or not buckets:
        raise ValueError("buckets must be a non-empty list (robustrl_weights.export_buckets)")
    out = []
    for i, b in enumerate(buckets):
        if not isinstance(b, dict) or not isinstance(b.get("handle"), str):
            raise ValueError("bucket {}: expected a dict with a base64 'handle' (robustrl_weights.export_buckets)".format(i))
        out.append({
            "sizeBytes": _count("bucket {} sizeBytes".format(i), b.get("sizeBytes")),
            "handle": b["handle"],
            "offset": _count("bucket {} offset".format(i), b.get("offset", 0)),
            "device": _count("bucket {} device".format(i), b.get("device", 0)),
        })
    return out


# Element sizes of the dtypes a manifest may name (as robustrl.named_weights and the agent know them).
TENSOR_DTYPE_BYTES = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
}

# The agent refuses longer tensor names (its event schema caps them).
MAX_TENSOR_NAME_CHARS = 500


def _tensors(tensors: Any, bucket_sizes: List[int]) -> List[Dict[str, Any]]:
    """The manifest's tensors as the agent takes them: each inside a bucket that exists, names unique."""
    if isinstance(tensors, (str, bytes, dict)) or not isinstance(tensors, (list, tuple)):
        raise ValueError("tensors must be a list of {{name, dtype, shape, bucket, offset}} entries, got {!r}".format(type(tensors).__name__))
    out: List[Dict[str, Any]] = []
    names = set()
    for i, entry in enumerate(tensors):
        t = entry.to_json() if hasattr(entry, "to_json") else entry
        if not isinstance(t, dict):
            raise ValueError("tensor {}: expected a dict with name, dtype, shape, bucket and offset".format(i))
        name = t.get("name")
        if not isinstance(name, str) or not 0 < len(name) <= MAX_TENSOR_NAME_CHARS:
            raise ValueError("tensor {}: name must be a string of 1 to {} characters, got {!r}".format(i, MAX_TENSOR_NAME_CHARS, name))
        if name in names:
            raise ValueError("tensor {!r} appears twice".format(name))
        names.add(name)
        dtype = t.get("dtype")
        if dtype not in TENSOR_DTYPE_BYTES:
            raise ValueError("tensor {!r}: unknown dtype {!r} (known: {})".format(name, dtype, ", ".join(sorted(TENSOR_DTYPE_BYTES))))
        shape = t.get("shape")
        if isinstance(shape, (str, bytes)) or not isinstance(shape, (list, tuple)):
            raise ValueError("tensor {!r}: shape must be a list of sizes, got {!r}".format(name, shape))
        dims = [_count("tensor {!r} dimension".format(name), d) for d in shape]
        bucket = _count("tensor {!r} bucket".format(name), t.get("bucket"))
        offset = _count("tensor {!r} offset".format(name), t.get("offset"))
        if bucket >= len(bucket_sizes):
            raise ValueError("tensor {!r}: bucket {} does not exist ({} buckets)".format(name, bucket, len(bucket_sizes)))
        nbytes = TENSOR_DTYPE_BYTES[dtype]
        for d in dims:
            nbytes *= d
        if offset + nbytes > bucket_sizes[bucket]:
            raise ValueError("tensor {!r}: bytes {}..{} lie outside bucket {} of {} bytes".format(name, offset, offset + nbytes, bucket, bucket_sizes[bucket]))
        out.append({"name": name, "dtype": dtype, "shape": dims, "bucket": bucket, "offset": offset})
    return out


def _shard(shard: Any, shards: Any) -> Dict[str, int]:
    if shard is None or shards is None:
        raise ValueError("give both shard (this publisher's index) and shards (how many), got shard={!r}, shards={!r}".format(shard, shards))
    if not _is_integer(shards) or shards < 1:
        raise ValueError("shards must be an integer >= 1, got {!r}".format(shards))
    if not _is_integer(shard) or not 0 <= shard < shards:
        raise ValueError("shard must be an integer in 0..{}, got {!r}".format(shards - 1, shard))
    return {"index": shard, "count": shards}


def _is_number(value: Any) -> bool:
    # bool is an int in Python; True as a step or rate is a bug, not 1.
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _step(step: Any) -> int:
    if not _is_integer(step) or step < 0:
        raise ValueError("step must be an integer >= 0, got {!r}".format(step))
    return step


def _count(name: str, value: Any) -> int:
    if not _is_integer(value) or value < 0:
        raise ValueError("{} must be an integer >= 0, got {!r}".format(name, value))
    return value


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("{} must be a non-empty string, got {!r}".format(name, value))
    return value


def _positive(name: str, value: Any) -> float:
    if not _is_number(value) or value <= 0:
        raise ValueError("{} must be a number > 0, got {!r}".format(name, value))
    return value


def _non_negative(name: str, value: Any) -> float:
    if not _is_number(value) or value < 0:
        raise ValueError("{} must be a number >= 0, got {!r}".format(name, value))
    return value


def _unit(name: str, value: Any) -> float:
    if not _is_number(value) or not 0 <= value <= 1:
        raise ValueError("{} must be a number in 0..1, got {!r}".format(name, value))
    return value


def _json_object(raw: bytes) -> Optional[Dict[str, Any]]:
    """The body as a JSON object, or None when it is not one."""
    try:
        value = json.loads(raw.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError and JSONDecodeError are both ValueErrors
        return None
    return value if isinstance(value, dict) else None


def _truncate(detail: str) -> str:
    if len(detail) <= MAX_DETAIL_CHARS:
        return detail
    # Keep the head (exception type and message) and the tail (innermost frames), the parts that say what broke.
    marker = "\n[... truncated ...]\n"
    head = MAX_DETAIL_CHARS // 3
    return detail[:head] + marker + detail[-(MAX_DETAIL_CHARS - head - len(marker)):]


def _describe_exception(exc: BaseException, step: int, batch_id: str) -> str:
    frames = traceback.format_tb(exc.__traceback__, limit=-TRACEBACK_FRAMES)
    return _truncate(
        "{}: {}\nstep {}, batch {}\nTraceback (innermost {} frames):\n{}".format(
            type(exc).__name__, exc, step, batch_id, TRACEBACK_FRAMES, "".join(frames).rstrip()
        )
    )
