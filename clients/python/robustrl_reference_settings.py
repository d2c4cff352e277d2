"""What the reference job (``robustrl_reference``) is: its settings, from ROBUSTRL_REF_* variables and
command-line flags, and the step count a harness may raise while it runs."""

import os
from typing import Any, Callable, Dict, Optional, Tuple


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
