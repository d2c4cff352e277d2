"""How the agent client (``robustrl_agent``) reaches the agent: HTTP over TCP or over the agent's Unix
socket, JSON both ways, and what a failure becomes (``AgentError``, or a log line and None).
"""

import http.client
import json
import logging
import os
import socket
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, List, Optional

from robustrl_agent_checks import _is_number

DEFAULT_AGENT_URL = "http://127.0.0.1:8086"
AGENT_URL_ENV = "ROBUSTRL_AGENT_URL"
# The agent's bearer token, when its API asks for one (ROBUSTRL_HTTP_TOKENS on the agent).
AGENT_TOKEN_ENV = "ROBUSTRL_AGENT_TOKEN"

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


class AgentTransport:
    """The connection to the agent that ``AgentClient`` builds on (its parameters are documented there)."""

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


def _json_object(raw: bytes) -> Optional[Dict[str, Any]]:
    """The body as a JSON object, or None when it is not one."""
    try:
        value = json.loads(raw.decode("utf-8"))
    except ValueError:  # UnicodeDecodeError and JSONDecodeError are both ValueErrors
        return None
    return value if isinstance(value, dict) else None
