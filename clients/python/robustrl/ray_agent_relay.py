"""An agent reached through its own machine's Ray node (``ElasticWorkerGroup(agents_on_nodes=True)``).

On Kubernetes a machine's agent listens on loopback and on a Unix socket in a node directory
(``ROBUSTRL_AGENT_SOCKET``, the chart's ``agent.socketDir``): the framework's pods on that node reach it, a
driver on another node does not. So the driver's calls to each agent — the command long poll, the
acknowledgements and outcomes, the reports of deaths — are made by a small actor on the machine's node
(``AgentRelay``, no CPU, placed by the node's ``robustrl-machine:<id>`` resource) and answered back: the
agent's API never leaves its node, and no token crosses the network.

``RelayedAgentClient`` is an ``AgentClient`` whose requests go through that actor. An agent's refusal
comes back as the same ``AgentError``; a relay that cannot be reached (its node gone, Ray away) is an
unreachable agent (``status`` None), which callers already retry.
"""

from typing import Any, Dict, Optional, Tuple

import ray

from robustrl_agent import AgentClient, AgentError

from .ray_placement import machine_resource

__all__ = ["AgentRelay", "RelayedAgentClient", "relayed_client"]

# The least of the machine's resource an actor asks for: it only marks the node.
_SLIVER = 0.001


class AgentRelay:
    """On a machine's node: makes the driver's requests to the agent there (``url``: its node-local URL)."""

    def __init__(self, url: str) -> None:
        self.client = AgentClient(url=url, raise_on_error=True)

    def node(self) -> str:
        """The Ray node it runs on (its machine's)."""
        return str(ray.get_runtime_context().get_node_id())

    def send(self, method: str, path: str, body: Optional[Dict[str, Any]], timeout: Optional[float]) -> Tuple[Any, ...]:
        try:
            return ("ok", self.client._send(method, path, body, timeout))
        except AgentError as err:
            return ("refused", err.message, err.status, err.issues)


class RelayedAgentClient(AgentClient):
    """An ``AgentClient`` whose requests the machine's ``AgentRelay`` makes on its node."""

    def __init__(self, url: str, relay: Any, machine_id: str, timeout: float = 2.0, raise_on_error: bool = False) -> None:
        super().__init__(url=url, timeout=timeout, raise_on_error=raise_on_error)
        self._relay = relay
        self.machine_id = machine_id

    def _send(self, method: str, path: str, body: Optional[Dict[str, Any]], timeout: Optional[float] = None) -> Dict[str, Any]:
        wait = self.timeout if timeout is None else timeout
        try:
            # The agent's own wait, and time for the relay's round trip on top.
            answer = ray.get(self._relay.send.remote(method, path, body, wait), timeout=wait + 30.0)
        except Exception as err:  # the relay's node gone, Ray away: the agent cannot be reached
            raise AgentError(method, path, "no relay to the agent on {}: {}".format(self.machine_id, err))
        if answer[0] == "ok":
            result: Dict[str, Any] = answer[1]
            return result
        _, message, status, issues = answer
        raise AgentError(method, path, message, status=status, issues=issues)


def relayed_client(machine_id: str, url: str) -> RelayedAgentClient:
    """A client of ``machine_id``'s agent at ``url`` on its node, through a relay actor placed there.

    The relay restarts with its node's raylet (Ray's own restarts: it holds no state), and waits for
    the node while the machine is away; long polls and other calls run side by side in it.
    """
    relay = (
        ray.remote(AgentRelay)
        .options(num_cpus=0, resources={machine_resource(machine_id): _SLIVER}, max_restarts=-1, max_concurrency=16)
        .remote(url)
    )
    return RelayedAgentClient(url, relay, machine_id)
