"""The test suites' fake HTTP servers (a fake agent, a fake controller): JSON in, JSON out, on a thread of
their own, with nothing logged. Standard library only; a test helper, not part of the package."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Type


class JsonHandler(BaseHTTPRequestHandler):
    """A request handler that reads and answers JSON; subclasses define do_GET / do_POST."""

    def log_message(self, *args: Any) -> None:
        pass

    def read_json(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}")

    def answer(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class FakeServer:
    """Serves ``handler`` on 127.0.0.1 (a free port) until ``close``; ``url`` is its base URL."""

    def __init__(self, handler: Type[JsonHandler]) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = "http://127.0.0.1:{}".format(self.server.server_address[1])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
