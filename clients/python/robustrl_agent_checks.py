"""Argument checks of the agent client (``robustrl_agent``): a mistake in the caller is a ValueError on
the first call, never a report the agent refuses later. Also how a long detail or an exception is cut
to what the agent takes.
"""

import math
import traceback
import urllib.parse
from typing import Any

# The agent rejects a longer detail (its event schema caps it at 4000 characters).
MAX_DETAIL_CHARS = 4000

# Frames kept in a step-exception report: the innermost ones, where the failure happened.
TRACEBACK_FRAMES = 5


def _command_path(command_id: Any, action: str) -> str:
    """A command's route: its id (which contains "/") URL-encoded as one path segment."""
    if not isinstance(command_id, str) or not command_id:
        raise ValueError("command_id must be a non-empty string, got {!r}".format(command_id))
    return "/v1/commands/{}/{}".format(urllib.parse.quote(command_id, safe=""), action)


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
