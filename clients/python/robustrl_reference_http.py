"""HTTP helpers of the reference job (``robustrl_reference``): JSON requests that never go through an
environment proxy, and retries that wait out a dependency restarting."""

import json
import logging
import socket
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Dict, Optional, Tuple

logger = logging.getLogger("robustrl_reference")

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
