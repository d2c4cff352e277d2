"""An elastic Ray worker group that robustrl drives (the paper's §6 framework side, docs/integrators/integrate-your-job.md,
"Ray").

A Ray single-controller job (verl, slime, NeMo-RL, OpenRLHF) owns every worker as an actor of its
driver. Under robustrl each GPU machine is a Ray node with an agent beside it in cooperate mode
(``ROBUSTRL_INTEGRATION=cooperate``); the driver keeps one ``ElasticWorkerGroup`` for the job::

    import ray
    from robustrl.ray import ElasticWorkerGroup, Machine

    ray.init(address="auto")
    group = ElasticWorkerGroup(
        [Machine("trainer-0", "http://10.0.0.1:8086", "trainer"), Machine("rollout-0", "http://10.0.0.2:8086", "rollout")],
        trainer=TrainerWorker,        # an actor class (plain or @ray.remote) with a run() method
        rollout=EngineWorker,
        trainer_procs_per_machine=8,
    ).start()
    group.wait()                      # until every trainer's run() returned: the job is done
    group.stop()

What it does:

- **Nodes to machines.** A Ray node hosts the machine whose resource it offers,
  ``robustrl-machine:<machine id>`` (``ray start --resources '{"robustrl-machine:trainer-0": 1}'``;
  ``machine_resource``); each worker asks for a sliver of it, so Ray places it there and nowhere else.
- **First launch and every restart ranked by robustrl.** Trainer workers start when the machine's agent
  has the group (``GET /v1/launch``) and again on each ``RestartTrainerGroup``: worker ``local`` of the
  machine at node rank ``R`` of ``W`` machines gets ``RANK = R × P + local``, ``WORLD_SIZE = W × P``,
  ``LOCAL_RANK``, ``GROUP_RANK`` (as torchrun sets them), the rendezvous and the step to retry, all in its
  process environment (Ray's ``runtime_env``), plus ``ROBUSTRL_AGENT_URL`` / ``ROBUSTRL_MACHINE_ID``.
- **The controller's commands, per machine** (``robustrl.cooperate``): ``RestartTrainerGroup`` replaces
  that machine's trainer workers; ``RestartRolloutEngine`` replaces its rollout worker;
  ``PromoteRolloutToTrainer`` removes its rollout worker (the group restart that follows starts trainers
  there); ``StopRole`` removes its workers. A command succeeds once the new workers are constructed; a
  constructor that raises fails it with the reason. Every other worker keeps running, and so does the
  driver: the group never restarts anything by itself.
- **Agents on their nodes** (``agents_on_nodes=True``): each ``Machine``'s URL is its agent as seen on its
  own node (on Kubernetes, ``unix:/run/robustrl/agent.sock``); the driver's calls go through a relay
  actor on that node (``robustrl.ray_agent_relay``), so a driver elsewhere never needs the agent's API on
  the network.
- **Deaths as evidence.** A worker that dies (its actor killed, its process crashed, its ``run()``
  raised) and was not removed by the group is reported to its machine's agent as ``process-exited``;
  the detector confirms it and the controller decides. A rollout whose ``run()`` returns has stopped
  serving, and is reported the same way.

A worker is an actor class whose ``run()`` does its work (a trainer's training loop, an engine's
serving) and returns when it is done; it runs on one thread of a threaded actor (``max_concurrency`` 4
unless ``actor_options`` say otherwise), so the worker's other methods stay callable. A worker may define
``stop()``: it is called (``stop_grace_s``) before the actor is killed, so a worker
that runs an engine as a child process can end it.

- **Drains as evidence** (``ray_drains.py``): a node Ray drains (``DrainNode``, a preemption with a
  deadline) is reported to its machine's agent as ``node-draining`` while its workers still run; the
  controller replaces the machine. Planning around the deadline is the planned-failure path
  (``docs/planned-failures.md``), not this group's.
"""

from __future__ import annotations

import copy
import logging
import re
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import ray

from robustrl_agent import AgentClient, AgentError

from robustrl.cooperate import CommandFollower
from robustrl.ray_agent_relay import relayed_client
from robustrl.ray_drains import DrainWatcher, machines_by_node
from robustrl.ray_placement import RESOURCE_PREFIX, ROLES, Machine, machine_resource, trainer_worker_env

__all__ = ["Machine", "ElasticWorkerGroup", "machine_resource", "trainer_worker_env", "RESOURCE_PREFIX"]

logger = logging.getLogger("robustrl.ray")

# What each worker asks of its machine's resource: a node offering 1 hosts up to 1000 workers.
_SLIVER = 0.001
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class _Worker:
    machine_id: str
    role: str
    local: int
    actor: Any
    run_ref: Any
    pid: Optional[int] = None
    removing: bool = False


class ElasticWorkerGroup:
    """The job's workers on Ray, created and destroyed as robustrl's controller says (module doc)."""

    def __init__(
        self,
        machines: Sequence[Machine],
        trainer: Any = None,
        rollout: Any = None,
        trainer_procs_per_machine: int = 1,
        worker_env: Optional[Mapping[str, str]] = None,
        actor_options: Optional[Mapping[str, Mapping[str, Any]]] = None,
        ready_timeout_s: float = 600.0,
        stop_grace_s: float = 10.0,
        client_factory: Callable[[str], AgentClient] = lambda url: AgentClient(url=url),
        follower_wait_s: float = 20.0,
        report_retry_s: float = 60.0,
        agents_on_nodes: bool = False,
        drain_poll_s: float = 5.0,
    ) -> None:
        if trainer_procs_per_machine < 1:
            raise ValueError("trainer_procs_per_machine must be >= 1, got {!r}".format(trainer_procs_per_machine))
        self._classes = {"trainer": trainer, "rollout": rollout}
        self.procs = trainer_procs_per_machine
        self.worker_env = dict(worker_env or {})
        self.actor_options = {role: dict((actor_options or {}).get(role, {})) for role in ROLES}
        self.ready_timeout_s = ready_timeout_s
        self.stop_grace_s = stop_grace_s
        self._client_factory = client_factory
        self.agents_on_nodes = agents_on_nodes
        self._follower_wait_s = follower_wait_s
        self.report_retry_s = report_retry_s
        self._lock = threading.RLock()
        self._machines: Dict[str, Machine] = {}
        self._clients: Dict[str, AgentClient] = {}
        self._followers: Dict[str, CommandFollower] = {}
        self._workers: List[_Worker] = []
        self._finished: List[_Worker] = []
        self._stopping = threading.Event()
        self._watcher: Optional[threading.Thread] = None
        # Ray's node drains, reported to the drained machine's agent (ray_drains.py); 0 turns it off.
        self._drains: Optional[DrainWatcher] = (
            DrainWatcher(self.draining, lambda: machines_by_node(ray.nodes()), self._machine_ids, self._report_drain, poll_s=drain_poll_s)
            if drain_poll_s > 0
            else None
        )
        # What the group reported and carried out, in order, for those who watch it (tests, logs).
        self.events: List[Dict[str, Any]] = []
        for machine in machines:
            self._add(machine)

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self, launch_poll_s: float = 1.0) -> "ElasticWorkerGroup":
        """Follows every machine's agent, starts each rollout's worker, and each trainer's workers once its
        agent has the group (waiting for it, saying so every 10 s)."""
        if not ray.is_initialized():
            raise RuntimeError("Ray is not initialized: call ray.init(...) before starting the worker group")
        self._watcher = threading.Thread(target=self._watch, name="robustrl-ray-watch", daemon=True)
        self._watcher.start()
        if self._drains is not None:
            self._drains.start()
        with self._lock:
            machines = list(self._machines.values())
        for machine in machines:
            self._follow(machine.machine_id)
            if machine.role == "rollout":
                self.create_workers(machine.machine_id, "rollout")
        for machine in machines:
            if machine.role == "trainer":
                launch = self._wait_for_launch(machine.machine_id, launch_poll_s)
                self.create_workers(machine.machine_id, "trainer", launch.get("env", {}))
        return self

    def add_machine(self, machine: Machine) -> None:
        """A machine joined (a replacement): follow its agent; a rollout gets its worker now, a trainer at
        the group restart that brings it in."""
        self._add(machine)
        self._follow(machine.machine_id)
        if machine.role == "rollout":
            self.create_workers(machine.machine_id, "rollout")

    def remove_machine(self, machine_id: str) -> None:
        """A machine left the job: its workers are removed and its agent no longer followed."""
        self.destroy_workers(machine_id)
        with self._lock:
            follower = self._followers.pop(machine_id, None)
            self._machines.pop(machine_id, None)
        if follower is not None:
            follower.stop(timeout=0)

    def wait(self, timeout: Optional[float] = None) -> bool:
        """True once every trainer worker's ``run()`` returned (the job is done); False on timeout or stop."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._stopping.is_set():
            with self._lock:
                trainers = [w for w in self._workers if w.role == "trainer"]
                done = not trainers and any(w.role == "trainer" for w in self._finished)
            if done:
                return True
            if deadline is not None and time.monotonic() > deadline:
                return False
            self._stopping.wait(0.2)
        return False

    def stop(self) -> None:
        """Stops following the agents and removes every worker."""
        self._stopping.set()
        if self._drains is not None:
            self._drains.stop()
        with self._lock:
            followers = list(self._followers.values())
            machine_ids = list(self._machines)
        for follower in followers:
            follower.stop(timeout=0)
        for machine_id in machine_ids:
            self.destroy_workers(machine_id)
        for client in list(self._clients.values()):
            relay = getattr(client, "_relay", None)
            if relay is not None:
                ray.kill(relay, no_restart=True)
        if self._watcher is not None:
            self._watcher.join(timeout=5)

    # -- the paper's create_worker / destroy_worker ------------------------------------------------

    def create_workers(self, machine_id: str, role: str, group_env: Optional[Mapping[str, Any]] = None) -> List[Any]:
        """Starts ``machine_id``'s workers of ``role`` on its node and waits until each is constructed;
        raises (with the worker's own error) when one is not. Returns their actor handles."""
        cls = self._classes.get(role)
        if cls is None:
            raise RuntimeError("no {} worker class was given to the group".format(role))
        with self._lock:
            machine = self._machines[machine_id]
        count = self.procs if role == "trainer" else 1
        base = dict(self.worker_env, ROBUSTRL_AGENT_URL=machine.agent_url, ROBUSTRL_MACHINE_ID=machine_id)
        started: List[_Worker] = []
        for local in range(count):
            env = dict(base, **(trainer_worker_env(group_env or {}, self.procs, local) if role == "trainer" else {}))
            actor = self._actor_class(cls).options(**self._options(machine_id, role, env)).remote()
            started.append(_Worker(machine_id, role, local, actor, None))
        try:
            for worker in started:
                ray.get(worker.actor.__ray_ready__.remote(), timeout=self.ready_timeout_s)
        except Exception:
            for worker in started:
                ray.kill(worker.actor, no_restart=True)
            raise
        for worker in started:
            worker.run_ref = worker.actor.run.remote()
        with self._lock:
            self._workers.extend(started)
        self._note("created", machine_id, role=role, count=count)
        return [w.actor for w in started]

    def destroy_workers(self, machine_id: str, role: Optional[str] = None) -> int:
        """Removes ``machine_id``'s workers (of ``role``, or all): ``stop()`` where a worker has one, then
        the actor is killed. Their deaths are not reported. Returns how many were removed."""
        with self._lock:
            leaving = [w for w in self._workers if w.machine_id == machine_id and (role is None or w.role == role)]
            for worker in leaving:
                worker.removing = True
                self._workers.remove(worker)
        if not leaving:
            return 0
        stops = []
        for worker in leaving:
            try:
                stops.append(worker.actor.stop.remote())
            except AttributeError:
                pass
        if stops:
            ray.wait(stops, num_returns=len(stops), timeout=self.stop_grace_s)
        for worker in leaving:
            ray.kill(worker.actor, no_restart=True)
        # Gone before the command is answered: a replacement may bind what they held (the rendezvous port).
        ends = [w.run_ref for w in leaving if w.run_ref is not None]
        if ends:
            ray.wait(ends, num_returns=len(ends), timeout=self.stop_grace_s)
        self._note("destroyed", machine_id, role=role or "all", count=len(leaving))
        return len(leaving)

    def workers(self, machine_id: Optional[str] = None) -> List[Dict[str, Any]]:
        """The live workers: machine, role, local index and actor handle."""
        with self._lock:
            return [
                {"machine": w.machine_id, "role": w.role, "local": w.local, "actor": w.actor}
                for w in self._workers
                if machine_id is None or w.machine_id == machine_id
            ]

    def role_of(self, machine_id: str) -> str:
        with self._lock:
            return self._machines[machine_id].role

    @staticmethod
    def draining() -> Dict[str, int]:
        """Ray nodes being drained: node id (hex) → deadline in ms since the epoch (0: none). Ray's
        ``DrainNode`` (autoscaler preemption, ``ray drain-node``); read through Ray's state API."""
        from ray._private.state import state  # not public API in Ray 2.x; the only reader of drains

        return dict(state.get_draining_nodes())

    # -- carrying out the controller's commands ---------------------------------------------------

    def carry_out(self, machine_id: str, command: Mapping[str, Any]) -> None:
        """One command for ``machine_id`` (``robustrl.cooperate``): raise to report it failed."""
        kind = command.get("type")
        if kind == "RestartTrainerGroup":
            self._set_role(machine_id, "trainer")
            self.destroy_workers(machine_id)
            self.create_workers(machine_id, "trainer", command.get("env", {}))
        elif kind == "RestartRolloutEngine":
            self.destroy_workers(machine_id, "rollout")
            self.create_workers(machine_id, "rollout")
        elif kind == "PromoteRolloutToTrainer":
            self.destroy_workers(machine_id, "rollout")
            self._set_role(machine_id, "trainer")
        elif kind == "StopRole":
            self.destroy_workers(machine_id)
        else:
            raise RuntimeError("{} is not a Ray worker group's to carry out".format(kind))
        self._note("carried-out", machine_id, command=kind, commandId=command.get("commandId"))

    # -- internals -------------------------------------------------------------------------------

    def _add(self, machine: Machine) -> None:
        with self._lock:
            if machine.machine_id in self._machines:
                raise ValueError("machine {} is already in the group".format(machine.machine_id))
            self._machines[machine.machine_id] = machine
            # Raising, so a launch refused (404) or a report not taken is seen, not logged and lost.
            client = (
                relayed_client(machine.machine_id, machine.agent_url)
                if self.agents_on_nodes
                else copy.copy(self._client_factory(machine.agent_url))
            )
            client.raise_on_error = True
            self._clients[machine.machine_id] = client

    def _follow(self, machine_id: str) -> None:
        client = self._clients[machine_id]
        follower = CommandFollower(client, lambda command: self.carry_out(machine_id, command), wait_s=self._follower_wait_s)
        with self._lock:
            self._followers[machine_id] = follower
        follower.start()

    def _set_role(self, machine_id: str, role: str) -> None:
        with self._lock:
            self._machines[machine_id].role = role

    def _wait_for_launch(self, machine_id: str, poll_s: float) -> Dict[str, Any]:
        client = self._clients[machine_id]
        said = 0.0
        while not self._stopping.is_set():
            try:
                answer = client.launch()
                if answer is not None:
                    return answer
                reason = "the group is not formed yet"
            except AgentError as err:
                if err.status == 404:
                    raise RuntimeError("{}'s agent has no trainer group to launch: {}".format(machine_id, err)) from err
                reason = str(err)
            if time.monotonic() - said > 10:
                said = time.monotonic()
                logger.info("%s: waiting for the trainer group: %s", machine_id, reason)
            self._stopping.wait(poll_s)
        raise RuntimeError("the worker group was stopped while waiting for {}'s trainer group".format(machine_id))

    @staticmethod
    def _actor_class(cls: Any) -> Any:
        return cls if isinstance(cls, ray.actor.ActorClass) else ray.remote(cls)

    def _options(self, machine_id: str, role: str, env: Mapping[str, str]) -> Dict[str, Any]:
        options = dict(self.actor_options[role])
        resources = dict(options.pop("resources", {}) or {})
        resources[machine_resource(machine_id)] = _SLIVER
        runtime_env = dict(options.pop("runtime_env", {}) or {})
        runtime_env["env_vars"] = dict(runtime_env.get("env_vars", {}), **env)
        # run() holds one thread of the actor; stop() and the framework's own calls need others.
        options.setdefault("max_concurrency", 4)
        # robustrl decides restarts: Ray's own would restart a worker behind the controller's back.
        return dict(options, resources=resources, runtime_env=runtime_env, max_restarts=0, max_task_retries=0)

    def _watch(self) -> None:
        while not self._stopping.is_set():
            with self._lock:
                running = {w.run_ref: w for w in self._workers if w.run_ref is not None}
            if not running:
                self._stopping.wait(0.2)
                continue
            try:
                ready, _ = ray.wait(list(running), num_returns=1, timeout=0.5)
            except Exception as err:  # Ray shutting down or unreachable: keep watching, never die silently
                logger.warning("watching the workers failed (retrying): %s", err)
                self._stopping.wait(1.0)
                continue
            for ref in ready:
                self._ended(running[ref], ref)

    def _ended(self, worker: _Worker, ref: Any) -> None:
        error: Optional[str] = None
        try:
            ray.get(ref)
        except Exception as exc:  # the worker's death or failure: evidence, not the driver's crash
            error = _describe(exc)
        with self._lock:
            if worker.removing or worker not in self._workers:
                return
            self._workers.remove(worker)
            if error is None and worker.role == "trainer":
                self._finished.append(worker)
                self._note("finished", worker.machine_id, role="trainer", local=worker.local)
                return
            client = self._clients.get(worker.machine_id)
        what = "died ({})".format(error) if error is not None else "returned: it no longer serves"
        detail = "Ray {} worker {} on {} {}".format(worker.role, worker.local, worker.machine_id, what)
        logger.warning(detail)
        self._note("reported", worker.machine_id, role=worker.role, detail=detail)
        if client is not None:
            threading.Thread(target=self._report, args=(client, worker.machine_id, detail), name="robustrl-ray-report", daemon=True).start()

    def _report(self, client: AgentClient, machine_id: str, detail: str) -> None:
        """A death reported to the machine's agent, retried while the agent restarts (a cooperating agent
        vouches for its role while the group follows it: a lost report would hide the death)."""
        deadline = time.monotonic() + self.report_retry_s
        while True:
            try:
                client.process_exited(detail)
                return
            except AgentError as err:
                refused = err.status is not None and err.status < 500
                if refused or time.monotonic() > deadline or self._stopping.is_set():
                    # Its agent may be gone with its node: the detector hears that silence.
                    logger.warning("could not report to %s's agent: %s", machine_id, err)
                    return
            time.sleep(1.0)

    def _machine_ids(self) -> set:
        with self._lock:
            return set(self._machines)

    def _report_drain(self, machine_id: str, detail: str, departs_in_s: Optional[float] = None) -> None:
        with self._lock:
            client = self._clients.get(machine_id)
        if client is None:
            return
        client.error("node-draining", detail, departs_in_s=departs_in_s)
        logger.warning(detail)
        self._note("drain-reported", machine_id, detail=detail)

    def _note(self, event: str, machine_id: str, **fields: Any) -> None:
        self.events.append(dict(fields, event=event, machine=machine_id, at=time.time()))
        logger.info("%s %s %s", event, machine_id, fields)


def _describe(exc: BaseException) -> str:
    """A worker's end in one line: what ``run()`` raised (Ray wraps it in a RayTaskError whose text is a
    coloured traceback), else Ray's own error (the actor died)."""
    cause = getattr(exc, "cause", None) if isinstance(exc, ray.exceptions.RayTaskError) else None
    if isinstance(cause, BaseException):
        return "{} in run(): {}".format(type(cause).__name__, _ANSI.sub("", str(cause)).strip())
    text = _ANSI.sub("", str(exc)).strip()
    return "{}: {}".format(type(exc).__name__, text.splitlines()[0] if text else "")
