"""A reference RL job for robustrl: a trainer, a rollout engine and the agent loops, standard library only.

It trains nothing, but it walks every path the control plane protects the way a real framework does, so
a deployment (or the chaos campaign) can be exercised end to end without GPUs or an ML framework:

    python3 robustrl_reference.py trainer       # one trainer rank; its agent runs it (ROBUSTRL_TRAINER_COMMAND)
    python3 robustrl_reference.py engine        # a rollout machine's inference engine (ROBUSTRL_ROLLOUT_COMMAND)
    python3 robustrl_reference.py agent-loops   # the agent workers: every step's prompts through the router

The job (semi-synchronous, one step off-policy):

- Weight version ``v`` is the policy after training step ``v``; version 0 is the initial policy.
- Step ``s`` (1..steps) trains on batch ``step-s``: ``batch_size`` prompts ``s<s>-p<k>``, one sample each,
  each a multi-turn trajectory with tool calls, generated through the router while the trainer trains
  step ``s-1`` (the agent loops start batch ``s`` once an engine serves version ``s-2`` or newer).
- The trainer waits for the batch in the request manager, fetches its completed trajectories within
  the staleness bound, "trains" (a digest of the trajectories, and a sleep), checkpoints after every
  step (so a restart retries exactly the step that failed), and rank 0 publishes the new version
  through its agent. Ranks meet at a TCP barrier at ``MASTER_ADDR:MASTER_PORT`` before each step, as
  NCCL would: a dead rank leaves the others stuck in the barrier, which is what the detector must see.
- An engine serves the version its agent holds whole (``/v1/weights/latest``), and writes it into every
  answer (``v<version>:``), so a turn's content says which weights produced it.

Everything a run did is appended to ``<state dir>/ledger.jsonl`` (one JSON object per line, fsync'd):
``trained`` (step, rank, attempt, trajectories used, digest), ``published``, ``checkpoint``, ``completed``
(agent loops: trajectory, turns, restarts). The campaign reads it to check its invariants.

Configuration comes from the environment the agent gives its role process (ROBUSTRL_JOB_ID,
ROBUSTRL_AGENT_URL, RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, ROBUSTRL_RETRY_STEP...) and from
ROBUSTRL_REF_* variables (see ``Settings``); command-line flags override both.
"""

import argparse
import hashlib
import json
import logging
import os
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, List, Optional, Tuple

from robustrl_agent import AgentClient

__all__ = ["Settings", "Ledger", "TrainerRank", "ReferenceEngine", "AgentLoops", "engine_reply", "tool_result", "weights_bytes", "main"]

logger = logging.getLogger("robustrl_reference")

BUCKETS = 2
BUCKET_BYTES = 64 * 1024


class Settings:
    """What the reference job is; every field has an ROBUSTRL_REF_<NAME> variable and a --<name> flag."""

    FIELDS: Dict[str, Tuple[Callable[[str], Any], Any, str]] = {
        "steps": (int, 20, "training steps of the job"),
        "batch_size": (int, 8, "prompts per step (one trajectory each)"),
        "tool_rounds": (int, 2, "tool calls per trajectory before its final answer"),
        "tokens_per_reply": (int, 16, "tokens an engine generates per answer"),
        "token_seconds": (float, 0.01, "time an engine takes per token"),
        "tool_seconds": (float, 0.05, "time a tool call takes"),
        "train_seconds": (float, 1.0, "time one training step takes"),
        "max_staleness": (int, 1, "weight versions a trained trajectory may be behind the trainer"),
        "concurrency": (int, 4, "trajectories the agent loops run at once"),
        "state_dir": (str, "", "where checkpoints and the ledger live (shared by every process of the job)"),
        "request_manager_url": (str, "", "the request manager's base URL"),
        "router_url": (str, "", "the router's base URL (agent loops)"),
        "port": (int, 0, "the engine's port (default: the port of ROBUSTRL_INFERENCE_URL)"),
    }

    def __init__(self, **values: Any) -> None:
        for name, (kind, default, _) in self.FIELDS.items():
            setattr(self, name, kind(values[name]) if values.get(name) not in (None, "") else default)
        if not self.request_manager_url:
            self.request_manager_url = os.environ.get("ROBUSTRL_REQUEST_MANAGER_URL", "")
        if not self.state_dir:
            raise ValueError("a state directory is required (ROBUSTRL_REF_STATE_DIR or --state-dir): checkpoints and the ledger live there")
        for name in ("steps", "batch_size", "concurrency", "tokens_per_reply"):
            if getattr(self, name) < 1:
                raise ValueError("{} must be at least 1, got {}".format(name, getattr(self, name)))

    def target_steps(self) -> int:
        """The job's step count now: ``steps``, or more where ``<state_dir>/steps`` says so. A harness may
        raise it while the job runs (the chaos campaign does, so that every planned fault lands before the
        end); it never falls below ``steps``, and every process reads it at its step boundaries."""
        try:
            with open(os.path.join(self.state_dir, "steps")) as f:
                return max(self.steps, int(f.read().strip()))
        except (OSError, ValueError):
            return self.steps

    @classmethod
    def from_env(cls, env: Dict[str, str], overrides: Optional[Dict[str, Any]] = None) -> "Settings":
        values = {name: env.get("ROBUSTRL_REF_" + name.upper()) for name in cls.FIELDS}
        values.update({k: v for k, v in (overrides or {}).items() if v is not None})
        return cls(**values)

    @property
    def job_id(self) -> str:
        return os.environ.get("ROBUSTRL_JOB_ID", "reference-job")


class Ledger:
    """Append-only JSON lines, flushed and fsync'd per record: what survives a kill -9 is what happened."""

    def __init__(self, state_dir: str) -> None:
        os.makedirs(state_dir, exist_ok=True)
        self.path = os.path.join(state_dir, "ledger.jsonl")
        self._lock = threading.Lock()

    def append(self, kind: str, **fields: Any) -> None:
        line = json.dumps(dict(kind=kind, at=time.time(), pid=os.getpid(), **fields), sort_keys=True)
        with self._lock, open(self.path, "a", encoding="utf-8") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    @staticmethod
    def read(state_dir: str) -> List[Dict[str, Any]]:
        path = os.path.join(state_dir, "ledger.jsonl")
        if not os.path.exists(path):
            return []
        out = []
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass  # a line cut by a kill -9 mid-write: it did not happen
        return out


# -- the policy (deterministic stand-ins) -----------------------------------------------------------


def weights_bytes(version: int) -> bytes:
    """The policy's weights at ``version``: deterministic, so any copy can be checked against it."""
    seed = hashlib.sha256("robustrl-reference-weights-{}".format(version).encode()).digest()
    block = seed * (BUCKET_BYTES // len(seed))
    return block * BUCKETS


def engine_reply(messages: List[Dict[str, Any]], version: int, tool_rounds: int, tokens: int) -> Dict[str, Any]:
    """The assistant message an engine holding ``version`` answers: a tool call for each of the first
    ``tool_rounds`` assistant turns, then a final answer. The content starts with ``v<version>:``."""
    done = sum(1 for m in messages if m.get("role") == "assistant")
    seed = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()
    words = " ".join("t{}".format(seed[(2 * i) % 60 : (2 * i) % 60 + 2]) for i in range(max(0, tokens - 1)))
    content = "v{}: {}".format(version, words).strip()
    if done < tool_rounds:
        call = {"id": "call-{}-{}".format(done, seed[:8]), "type": "function", "function": {"name": "lookup", "arguments": json.dumps({"q": seed[:6]})}}
        return {"role": "assistant", "content": content, "tool_calls": [call]}
    return {"role": "assistant", "content": content}


def tool_result(call: Dict[str, Any]) -> Dict[str, Any]:
    """The environment's answer to a tool call (deterministic)."""
    args = call.get("function", {}).get("arguments", "")
    return {"role": "tool", "tool_call_id": call.get("id", ""), "content": "result of " + hashlib.sha256(args.encode()).hexdigest()[:12]}


# -- HTTP helpers -----------------------------------------------------------------------------------

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_json(method: str, url: str, body: Any = None, headers: Optional[Dict[str, str]] = None, timeout: float = 30.0) -> Tuple[int, Any, Dict[str, str]]:
    """(status, parsed JSON or None, headers); raises OSError when nothing answered."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            raw, status, got = response.read(), response.status, dict(response.headers)
    except urllib.error.HTTPError as err:
        raw, status, got = err.read(), err.code, dict(err.headers or {})
        err.close()
    except (urllib.error.URLError, socket.timeout, ConnectionError) as err:
        raise OSError("{} {}: {}".format(method, url, getattr(err, "reason", err)))
    try:
        parsed = json.loads(raw) if raw.strip() else None
    except ValueError:
        parsed = None
    return status, parsed, {k.lower(): v for k, v in got.items()}


def retrying(what: str, fn: Callable[[], Any], deadline_s: float = 600.0, stop: Optional[threading.Event] = None) -> Any:
    """Call ``fn`` until it returns something other than None (a dependency restarting is waited out)."""
    started, delay, last = time.monotonic(), 0.2, None
    while time.monotonic() - started < deadline_s and not (stop and stop.is_set()):
        try:
            result = fn()
            if result is not None:
                return result
        except OSError as err:
            if str(err) != last:
                logger.warning("%s: %s (retrying)", what, err)
                last = str(err)
        time.sleep(delay)
        delay = min(delay * 2, 2.0)
    raise TimeoutError("{}: gave up after {:.0f} s".format(what, time.monotonic() - started))


# -- trainer ----------------------------------------------------------------------------------------


class StepBarrier:
    """Ranks meet before each step, as a collective would: rank 0 listens, the others connect. A rank
    that dies leaves the others waiting (a hung collective), or failing on the closed socket."""

    def __init__(self, rank: int, world: int, host: str, port: int, timeout_s: float = 3600.0) -> None:
        self.rank, self.world = rank, world
        self.peers: List[socket.socket] = []
        self.conn: Optional[socket.socket] = None
        if world == 1:
            return
        if rank == 0:
            server = socket.socket()
            server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            server.bind(("0.0.0.0", port))
            server.listen(world)
            server.settimeout(timeout_s)
            self.peers = [server.accept()[0] for _ in range(world - 1)]
            server.close()
        else:
            self.conn = retrying("rendezvous with rank 0 at {}:{}".format(host, port), lambda: socket.create_connection((host, port), timeout=5), deadline_s=timeout_s)
            self.conn.settimeout(None)

    def wait(self, step: int) -> None:
        token = "{}\n".format(step).encode()
        if self.world == 1:
            return
        if self.rank == 0:
            for peer in self.peers:
                if _read_line(peer) != token:
                    raise ConnectionError("a rank left the group before step {}".format(step))
            for peer in self.peers:
                peer.sendall(token)
        else:
            assert self.conn is not None
            self.conn.sendall(token)
            if _read_line(self.conn) != token:
                raise ConnectionError("rank 0 left the group before step {}".format(step))


    def close(self) -> None:
        for sock in self.peers + ([self.conn] if self.conn else []):
            sock.close()


def _read_line(sock: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(64)
        if not chunk:
            return data
        data += chunk
    return data


class TrainerRank:
    """One trainer rank of the reference job (see the module doc)."""

    def __init__(self, settings: Settings, agent: Optional[AgentClient] = None, env: Optional[Dict[str, str]] = None) -> None:
        env = dict(os.environ if env is None else env)
        self.s = settings
        self.agent = agent or AgentClient()
        self.ledger = Ledger(settings.state_dir)
        self.rank = int(env.get("RANK", "0"))
        self.world = int(env.get("WORLD_SIZE", "1"))
        self.master = (env.get("MASTER_ADDR", "127.0.0.1"), int(env.get("MASTER_PORT", "29500")))
        self.attempt = int(env.get("ROBUSTRL_RESTART_COUNT", "0"))
        self.checkpoints = os.path.join(settings.state_dir, "checkpoints")
        os.makedirs(self.checkpoints, exist_ok=True)

    def last_checkpoint(self) -> int:
        steps = [int(n.split("-")[1]) for n in os.listdir(self.checkpoints) if n.startswith("step-") and not n.endswith(".tmp")]
        return max(steps, default=0)

    def run(self) -> None:
        start = self.last_checkpoint() + 1
        self.agent.phase("initializing", max(start - 1, 0))
        if self.rank == 0:
            self.reconcile_ledger(start - 1)
            self.publish(start - 1)
        barrier = StepBarrier(self.rank, self.world, self.master[0], self.master[1])
        step = start
        while step <= self.s.target_steps():
            batch = self.wait_for_batch(step)
            with self.agent.training_step(step, "step-{}".format(step)):
                # The step's first collective: a dead peer hangs this rank here, in the training phase, as NCCL would.
                barrier.wait(step)
                digest = self.train(step, batch)
            if self.rank == 0:
                self.checkpoint(step, digest)
                self.publish(step)
            step += 1
        self.agent.phase("idle", step - 1)
        logger.info("rank %s: all %s steps trained", self.rank, step - 1)

    def reconcile_ledger(self, step: int) -> None:
        """The checkpoint file is a step's commit; its ledger line follows it. A kill -9 between the two
        leaves a committed step the ledger does not show: it is written now, before anything else."""
        if step > 0 and not any(r.get("kind") == "checkpoint" and r.get("step") == step for r in Ledger.read(self.s.state_dir)):
            self.ledger.append("checkpoint", step=step, recovered=True)

    def wait_for_batch(self, step: int) -> Dict[str, Any]:
        """Idle until the request manager holds the whole batch, then fetch what is within the bound."""
        self.agent.phase("idle", step)
        base = "{}/v1/jobs/{}/batches/step-{}".format(self.s.request_manager_url, self.s.job_id, step)

        def complete() -> Optional[bool]:
            status, progress, _ = http_json("GET", base, timeout=10)
            return True if status == 200 and progress and progress.get("completed", 0) >= self.s.batch_size else None

        retrying("batch step-{}".format(step), complete, deadline_s=24 * 3600)
        query = "{}/completed?currentWeightVersion={}&maxStaleness={}".format(base, step - 1, self.s.max_staleness)

        def fetch() -> Optional[Dict[str, Any]]:
            status, batch, _ = http_json("GET", query, timeout=30)
            return batch if status == 200 else None

        return retrying("fetch batch step-{}".format(step), fetch)

    def train(self, step: int, batch: Dict[str, Any]) -> str:
        trajectories = sorted(batch.get("trajectories", []), key=lambda t: t["trajectoryId"])
        digest = hashlib.sha256(json.dumps([[t["trajectoryId"], [u["turnId"] for u in t.get("turns", [])]] for t in trajectories]).encode()).hexdigest()
        # What DCGM would read during the step (the agent's emulated source takes pushes; a hardware source refuses them).
        self.agent.gpu_activity(tensor_active=0.9, interval_seconds=max(self.s.train_seconds, 0.001))
        time.sleep(self.s.train_seconds)
        self.ledger.append(
            "trained", step=step, rank=self.rank, attempt=self.attempt, trajectories=len(trajectories), stale=len(batch.get("stale", [])), digest=digest
        )
        return digest

    def checkpoint(self, step: int, digest: str) -> None:
        self.agent.phase("checkpoint", step)
        started = time.monotonic()
        path = os.path.join(self.checkpoints, "step-{}".format(step))
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            json.dump({"step": step, "digest": digest}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(path + ".tmp", path)
        self.ledger.append("checkpoint", step=step)
        self.agent.checkpoint_saved(step, "file://" + path, blocking_ms=int((time.monotonic() - started) * 1000))

    def publish(self, version: int) -> None:
        """Write version ``version`` to shared memory and hand it to the agent (rank 0)."""
        self.agent.phase("weight-update", max(version, 0))
        name = "{}-v{}".format(self.s.job_id.replace("/", "_"), version)
        shm_dir = os.environ.get("ROBUSTRL_WEIGHTS_SHM_DIR", "/dev/shm")
        with open(os.path.join(shm_dir, name), "wb") as f:
            f.write(weights_bytes(version))
        answer = retrying("publish version {}".format(version), lambda: self.agent.publish_weights(version, max(version, 0), name, [BUCKET_BYTES] * BUCKETS))
        self.ledger.append("published", version=version, totalBytes=answer.get("totalBytes"))


# -- rollout engine ---------------------------------------------------------------------------------


class ReferenceEngine:
    """An OpenAI-compatible engine (chat completions, non-streaming) serving the weights its agent holds."""

    def __init__(self, settings: Settings, agent: Optional[AgentClient] = None) -> None:
        self.s = settings
        self.agent = agent or AgentClient()
        self.version: Optional[int] = None
        self.stop = threading.Event()
        self.tokens = 0
        self.completed = 0
        self.in_flight = 0
        self._lock = threading.Lock()
        engine = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                if self.path in ("/health", "/v1/models"):
                    body = {"object": "list", "data": [{"id": "reference", "object": "model"}]} if self.path == "/v1/models" else {"version": engine.version}
                    return self._send(200, body)
                self._send(404, {"error": {"message": "no route " + self.path}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    return self._send(400, {"error": {"message": "the body is not JSON"}})
                if self.path != "/v1/chat/completions" or not isinstance(body.get("messages"), list):
                    return self._send(400, {"error": {"message": "only POST /v1/chat/completions with messages"}})
                if body.get("stream"):
                    return self._send(400, {"error": {"message": "the reference engine does not stream"}})
                version = engine.version
                if version is None:
                    return self._send(503, {"error": {"message": "no weights loaded yet"}})
                with engine._lock:
                    engine.in_flight += 1
                try:
                    time.sleep(engine.s.token_seconds * engine.s.tokens_per_reply)
                    message = engine_reply(body["messages"], version, engine.s.tool_rounds, engine.s.tokens_per_reply)
                finally:
                    with engine._lock:
                        engine.in_flight -= 1
                        engine.tokens += engine.s.tokens_per_reply
                        engine.completed += 1
                finish = "tool_calls" if message.get("tool_calls") else "stop"
                self._send(
                    200,
                    {
                        "id": "chatcmpl-" + hashlib.sha256(json.dumps(body["messages"]).encode()).hexdigest()[:12],
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": "reference",
                        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                        "usage": {"prompt_tokens": 0, "completion_tokens": engine.s.tokens_per_reply, "total_tokens": engine.s.tokens_per_reply},
                    },
                    # The version that produced the answer: the router tags the turn with it, even while its view of this engine lags.
                    {"x-robustrl-weight-version": str(version)},
                )

            def _send(self, status: int, body: Any, headers: Optional[Dict[str, str]] = None) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        port = settings.port or _port_of(os.environ.get("ROBUSTRL_INFERENCE_URL", ""))
        self.server = ThreadingHTTPServer(("0.0.0.0", port), Handler)
        self.server.daemon_threads = True

    @property
    def url(self) -> str:
        return "http://127.0.0.1:{}".format(self.server.server_address[1])

    def load_newest(self) -> None:
        """Load the newest version the agent holds whole, checking its bytes against the policy."""
        latest = self.agent.latest_weights()
        if not latest or (self.version is not None and latest["version"] <= self.version):
            return
        version = int(latest["version"])
        self.agent.phase("weight-update", max(version, 0))
        with open(latest["path"], "rb") as f:
            held = f.read(int(latest.get("totalBytes", BUCKETS * BUCKET_BYTES)))
        if held != weights_bytes(version):
            self.agent.error("step-exception", "weights of version {} at {} do not match the published policy".format(version, latest["path"]))
            return
        self.version = version
        self.agent.phase("rollout", max(version, 0))
        logger.info("engine serves weight version %s", version)

    def report(self, window_s: float) -> None:
        with self._lock:
            tokens, completed, in_flight = self.tokens, self.completed, self.in_flight
            self.tokens, self.completed = 0, 0
        self.agent.throughput(window_seconds=window_s, tokens_per_second=tokens / window_s, completed_requests=completed, in_flight_requests=in_flight, awaiting_tools=0)

    def serve(self, report_every_s: float = 5.0) -> None:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.agent.phase("initializing", 0)
        logger.info("reference engine at %s", self.url)
        last_report = time.monotonic()
        while not self.stop.is_set():
            self.load_newest()
            if time.monotonic() - last_report >= report_every_s:
                self.report(time.monotonic() - last_report)
                last_report = time.monotonic()
            self.stop.wait(0.2)
        self.server.shutdown()


def _port_of(url: str) -> int:
    if not url:
        return 0
    return int(urllib.parse.urlparse(url).port or 80)


# -- agent loops ------------------------------------------------------------------------------------


class AgentLoops:
    """The agent workers: run every step's prompts as multi-turn tool-calling trajectories through the
    router, and mark each completed in the request manager. Batch ``s`` starts once an engine serves
    version ``s-2`` or newer (one batch ahead of the trainer, no more)."""

    def __init__(self, settings: Settings) -> None:
        if not settings.router_url:
            raise ValueError("the agent loops need the router's URL (ROBUSTRL_REF_ROUTER_URL or --router-url)")
        if not settings.request_manager_url:
            raise ValueError("the agent loops need the request manager's URL (ROBUSTRL_REQUEST_MANAGER_URL or --request-manager-url)")
        self.s = settings
        self.ledger = Ledger(settings.state_dir)
        self.stop = threading.Event()

    def served_version(self) -> Optional[int]:
        status, listed, _ = http_json("GET", self.s.router_url + "/v1/engines", timeout=5)
        versions = [e.get("weightVersion", 0) for e in (listed or {}).get("engines", []) if e.get("alive")]
        return max(versions) if versions else None

    def run(self) -> None:
        step = 0
        while step < self.s.target_steps():
            step += 1
            retrying("an engine serving version {}".format(step - 2), lambda: True if (self.served_version() or 0) >= step - 2 else None, 24 * 3600, self.stop)
            prompts = list(range(self.s.batch_size))
            threads = [threading.Thread(target=self._worker, args=(step, prompts)) for _ in range(self.s.concurrency)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            logger.info("batch step-%s generated", step)

    def _worker(self, step: int, prompts: List[int]) -> None:
        while not self.stop.is_set():
            try:
                k = prompts.pop(0)
            except IndexError:
                return
            self.trajectory(step, k)

    def trajectory(self, step: int, k: int) -> None:
        prompt_id = "s{}-p{}".format(step, k)
        headers = {"x-robustrl-job": self.s.job_id, "x-robustrl-prompt": prompt_id, "x-robustrl-sample": "0", "x-robustrl-step": str(step), "x-robustrl-batch": "step-{}".format(step)}
        initial = [{"role": "system", "content": "reference job"}, {"role": "user", "content": "task {}".format(prompt_id)}]
        messages, restarts, turns, trajectory_id = list(initial), 0, 0, None
        while not self.stop.is_set():
            answer = self._chat(messages, headers)
            trajectory_id = answer.get("trajectoryId") or trajectory_id
            if answer.get("restarted"):
                restarts += 1
                messages = list(initial)
                continue
            message = answer["message"]
            messages.append(message)
            turns += 1
            calls = message.get("tool_calls") or []
            if not calls:
                break
            time.sleep(self.s.tool_seconds)
            messages.extend(tool_result(c) for c in calls)
        if trajectory_id is None:
            return  # stopped before the router answered once
        url = "{}/v1/trajectories/{}/status".format(self.s.request_manager_url, urllib.parse.quote(trajectory_id, safe=""))

        def complete() -> Optional[bool]:
            status, body, _ = http_json("POST", url, {"status": "completed"}, timeout=10)
            if status in (200, 409):
                return True
            raise OSError("request manager answered {}: {}".format(status, body))

        retrying("complete " + trajectory_id, complete, stop=self.stop)
        self.ledger.append("completed", step=step, trajectoryId=trajectory_id, turns=turns, restarts=restarts)

    def _chat(self, messages: List[Dict[str, Any]], headers: Dict[str, str]) -> Dict[str, Any]:
        """One request through the router, retried while the router or every engine is away; a 409
        (TrajectoryRestartedError, or a conflict with the stored history) means start again from the prompt."""

        def once() -> Optional[Dict[str, Any]]:
            status, body, got = http_json("POST", self.s.router_url + "/v1/chat/completions", {"model": "reference", "messages": messages}, headers, timeout=120)
            trajectory_id = got.get("x-robustrl-trajectory")
            if status == 200:
                return {"message": body["choices"][0]["message"], "trajectoryId": trajectory_id}
            if status == 409:
                # Restarted from the prompt by the continuation policy (x-robustrl-restarted says why), or our history no
                # longer matches the stored one (a request still on a dropped attempt): either way, start again from the prompt.
                return {"restarted": got.get("x-robustrl-restarted", "conflict"), "trajectoryId": trajectory_id}
            raise OSError("router answered {}: {}".format(status, json.dumps(body)[:300]))

        return retrying("chat for {}".format(headers["x-robustrl-prompt"]), once, stop=self.stop)


# -- command line -----------------------------------------------------------------------------------


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="robustrl_reference.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("role", choices=["trainer", "engine", "agent-loops"])
    for name, (kind, default, help_text) in Settings.FIELDS.items():
        parser.add_argument("--" + name.replace("_", "-"), dest=name, type=kind, default=None, help="{} (ROBUSTRL_REF_{}, default {!r})".format(help_text, name.upper(), default))
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s[{}] %(levelname)s %(message)s".format(args.role))
    try:
        settings = Settings.from_env(dict(os.environ), {k: v for k, v in vars(args).items() if k != "role"})
        role = {"trainer": TrainerRank, "engine": ReferenceEngine, "agent-loops": AgentLoops}[args.role](settings)
    except ValueError as err:
        parser.error(str(err))
    if isinstance(role, ReferenceEngine):
        role.serve()
    else:
        role.run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
