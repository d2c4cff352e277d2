"""JSON over HTTP for the job's processes (standard library), and waiting out what is away.

The job talks to robustrl's router and request manager. Either may be restarting (a fault, a deploy):
a call that could not be made or was answered 5xx is retried with backoff until a deadline, as a
framework's worker does; a 4xx is the caller's mistake and is raised at once.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Dict, Optional, Tuple, TypeVar

__all__ = ["request_json", "retrying", "HttpError"]

logger = logging.getLogger("robustrl_grpo")
T = TypeVar("T")
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class HttpError(RuntimeError):
    def __init__(self, status: Optional[int], message: str) -> None:
        super().__init__(message)
        self.status = status


def request_json(
    method: str, url: str, body: Any = None, headers: Optional[Dict[str, str]] = None, timeout: float = 60.0
) -> Tuple[int, Any, Dict[str, str]]:
    """(status, parsed body or None, headers); raises HttpError(None, …) when no answer came."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"content-type": "application/json", **(headers or {})})
    try:
        with _OPENER.open(request, timeout=timeout) as response:
            raw = response.read()
            return response.status, (json.loads(raw) if raw else None), {k.lower(): v for k, v in response.headers.items()}
    except urllib.error.HTTPError as err:
        raw = err.read()
        try:
            parsed = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            parsed = {"error": raw[:500].decode("utf-8", "replace")}
        return err.code, parsed, {k.lower(): v for k, v in (err.headers or {}).items()}
    except (urllib.error.URLError, OSError) as err:
        raise HttpError(None, f"{method} {url}: {getattr(err, 'reason', err)}") from err


def retrying(what: str, attempt: Callable[[], Optional[T]], deadline_s: float = 3600.0, stop: Optional[Callable[[], bool]] = None) -> T:
    """Calls ``attempt`` until it returns a value (None: not yet) or raises something other than a
    transient HttpError (no answer, or 5xx); backoff 0.2 s doubling to 5 s. Logs once a wait is long."""
    started = time.monotonic()
    delay, warned = 0.2, False
    while True:
        try:
            value = attempt()
            if value is not None:
                return value
            reason = "not yet"
        except HttpError as err:
            if err.status is not None and err.status < 500:
                raise
            reason = str(err)
        if stop is not None and stop():
            raise InterruptedError(f"{what}: stopped")
        waited = time.monotonic() - started
        if waited > deadline_s:
            raise TimeoutError(f"{what}: gave up after {waited:.0f} s ({reason})")
        if waited > 30 and not warned:
            logger.warning("%s: still waiting after %.0f s (%s)", what, waited, reason)
            warned = True
        time.sleep(delay)
        delay = min(delay * 2, 5.0)
