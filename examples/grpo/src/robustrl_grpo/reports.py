"""What a trainer rank tells its robustrl agent: its phase, each step's begin and end, each checkpoint.

Phase-aware detection reads these (a trainer idle in the training phase is suspect; one waiting for its
batch is not), the controller restarts a group from the newest checkpoint it was told of, and the ETTR
projection counts a machine's time by its phase. Without an agent (the local job) nothing is sent.
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Mapping, Protocol

__all__ = ["Reports", "NoReports", "reports_for"]


class Reports(Protocol):
    def phase(self, phase: str, step: int) -> object: ...

    def training_step(self, step: int, batch_id: str) -> "contextlib.AbstractContextManager[None]": ...

    def checkpoint_saved(self, step: int, uri: str, blocking_ms: int) -> object: ...


class NoReports:
    def phase(self, phase: str, step: int) -> None:
        return None

    @contextlib.contextmanager
    def training_step(self, step: int, batch_id: str) -> Iterator[None]:
        yield

    def checkpoint_saved(self, step: int, uri: str, blocking_ms: int) -> None:
        return None


def reports_for(env: Mapping[str, str]) -> Reports:
    """The agent's client when the agent started this process (``ROBUSTRL_AGENT_URL``), else nothing.
    A machine's phase is one phase: with several ranks on a machine (``LOCAL_RANK``), its first tells
    it. A report that fails is logged, never raised: the agent's absence must not stop training."""
    if not env.get("ROBUSTRL_AGENT_URL") or env.get("LOCAL_RANK", "0") != "0":
        return NoReports()
    from robustrl_agent import AgentClient

    return AgentClient(url=env["ROBUSTRL_AGENT_URL"])
