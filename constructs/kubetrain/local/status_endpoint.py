"""Kubeflow Trainer's status endpoint for one TrainJob, served on loopback by `kubetrain run-local`.

It answers as the Trainer's status server does (kubeflow/trainer v2.3.0, pkg/statusserver/server.go):
`POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/<ns>/trainjobs/<name>/status` over TLS, a bearer token bound
to this TrainJob (403 otherwise, as a token of another job's audience is), a body of at most 64 KiB (413), and a
`{"trainerStatus": {...}}` payload applied to the TrainJob's status: 200 with the payload echoed, or 422 with the
reason, as a metav1.Status. Where the Trainer decodes the payload into its Go types and the API server checks the
result against the CRD, this endpoint checks the same: integers where the types say int32, an RFC 3339
`lastUpdatedTime`, then the committed TrainJob with the status against the TrainJob CRD's schema and CEL rules
(kubetrain validate's code). It is stricter in one way: an unknown field is refused, where the Trainer would drop it
without a word (and the status would never show it).
"""

from __future__ import annotations

import hmac
import json
import re
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kubetrain.local.certificates import LOOPBACK, ServerTLS
from kubetrain_runtime.progress import INT32_MAX, status_path

MAX_BODY = 1 << 16  # the Trainer's maxBodySize
READ_TIMEOUT_S = 10.0  # the Trainer's readTimeout
_DISCARD_LIMIT = 1 << 20
_ANY_STATUS_PATH = re.compile(r"^/apis/trainer\.kubeflow\.org/v1alpha1/namespaces/[^/]+/trainjobs/[^/]+/status$")
# time.RFC3339 as Go parses it: fractional seconds allowed, a zone required.
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
_INT32_FIELDS = ("progressPercentage", "estimatedRemainingSeconds")


class StatusEndpoint:
    """Serves one TrainJob's status endpoint until `stop()`; `on_status` sees each applied trainerStatus."""

    def __init__(self, trainjob: dict[str, Any], tls: ServerTLS, token: str,
                 on_status: Callable[[dict[str, Any]], None] = lambda status: None,
                 on_refused: Callable[[int, str], None] = lambda code, message: None, port: int = 0):
        metadata = trainjob["metadata"]
        self.trainjob, self.token = trainjob, token
        self.path = status_path(metadata["namespace"], metadata["name"])
        self.on_status, self.on_refused = on_status, on_refused
        self.received: list[dict[str, Any]] = []  # every applied trainerStatus, in order
        self.status: dict[str, Any] = {}  # the TrainJob's status.trainerStatus now
        from kubetrain.validation.validate import Schemas
        self._schemas = Schemas()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(tls.cert, tls.key)
        self._server = _Server((LOOPBACK, port), _Handler, self)
        # The handshake runs in the request's thread (see _Handler.setup): a client that never completes it holds
        # one thread until the read timeout, not the accept loop.
        self._server.socket = context.wrap_socket(self._server.socket, server_side=True, do_handshake_on_connect=False)
        self._thread = threading.Thread(target=self._server.serve_forever, name="trainjob-status-endpoint",
                                        daemon=True)

    @property
    def url(self) -> str:
        return f"https://{LOOPBACK}:{self._server.server_address[1]}{self.path}"

    def start(self) -> StatusEndpoint:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> StatusEndpoint:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- one request --------------------------------------------------------------------------------

    def answer(self, method: str, path: str, authorization: str, body: bytes | None) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON reply) for one request; `body` None when it is over the size limit."""
        if not _ANY_STATUS_PATH.match(path):
            return _failure(404, "NotFound", "Not found")
        if method != "POST":
            return _failure(405, "MethodNotAllowed", f"{method} is not allowed: POST the status")
        if path != self.path or not _bearer_matches(authorization, self.token):
            return _failure(403, "Forbidden", "Forbidden")
        if body is None:
            return _failure(413, "RequestEntityTooLarge", "Payload too large")
        try:
            request = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            return _failure(422, "Invalid", "Invalid payload")
        problems = self.problems(request)
        if problems:
            return _failure(422, "Invalid", "; ".join(problems))
        status = request.get("trainerStatus")
        if status is not None:  # no trainerStatus: nothing to apply, the Trainer answers 200 all the same
            self.status = status
            self.received.append(status)
            self.on_status(status)
        return 200, request

    def problems(self, request: Any) -> list[str]:
        """Why the Trainer (decoding) or the API server (the CRD) would refuse the payload."""
        if not isinstance(request, dict):
            return ["the payload is not a JSON object"]
        unknown = sorted(set(request) - {"trainerStatus"})
        if unknown:
            return [f"{', '.join(unknown)}: unknown field (the payload has only trainerStatus)"]
        status = request.get("trainerStatus")
        if status is None:
            return []
        if not isinstance(status, dict):
            return ["trainerStatus: not an object"]
        problems = []
        for name in _INT32_FIELDS:
            value = status.get(name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or
                                      not -2**31 <= value <= INT32_MAX):
                problems.append(f"trainerStatus.{name}: {value!r} is not a 32-bit integer")
        stamp = status.get("lastUpdatedTime")
        if stamp is not None and (not isinstance(stamp, str) or not _RFC3339.match(stamp)):
            problems.append(f"trainerStatus.lastUpdatedTime: {stamp!r} is not an RFC 3339 time")
        if problems:
            return problems
        from kubetrain.model.manifests import Manifest
        from kubetrain.validation.validate import supported_kubernetes_versions, validate_objects
        applied = {**self.trainjob, "status": {"trainerStatus": status}}
        findings = validate_objects([Manifest("status", applied)], self._schemas, supported_kubernetes_versions()[-1])
        return [f"{finding.path}: {finding.message}" for finding in findings]


def progress_line(status: dict[str, Any]) -> str:
    """One applied trainerStatus as run-local prints it: `42 %, 12 s left: loss 2.31, ...`."""
    parts = []
    if "progressPercentage" in status:
        parts.append(f"{status['progressPercentage']} %")
    if "estimatedRemainingSeconds" in status:
        parts.append(f"{status['estimatedRemainingSeconds']} s left")
    head = ", ".join(parts) or "no progress"
    metrics = ", ".join(f"{m['name']} {m['value']}" for m in status.get("metrics", []))
    return f"{head}: {metrics}" if metrics else head


def _bearer_matches(authorization: str, token: str) -> bool:
    """An RFC 7235 Bearer credential equal to `token` (the scheme case-insensitive, as the Trainer reads it)."""
    parts = authorization.split()
    return len(parts) == 2 and parts[0].lower() == "bearer" and hmac.compare_digest(parts[1].encode(), token.encode())


def _failure(code: int, reason: str, message: str) -> tuple[int, dict[str, Any]]:
    return code, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
                  "reason": reason, "code": code}


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type, endpoint: StatusEndpoint):
        self.endpoint = endpoint
        super().__init__(address, handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that refused our certificate or went away: its own side reports it


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    timeout = READ_TIMEOUT_S

    def setup(self) -> None:
        self.request.settimeout(self.timeout)
        self.request.do_handshake()
        super().setup()

    def _serve(self) -> None:
        endpoint = self.server.endpoint
        length = int(self.headers.get("Content-Length") or 0)
        # A body over the limit is read and dropped (as Go's server discards an unread one, up to a bound), so the
        # client gets its 413 instead of a reset connection.
        body = self.rfile.read(length) if length <= _DISCARD_LIMIT else None
        body = body if body is not None and len(body) <= MAX_BODY else None
        code, reply = endpoint.answer(self.command, self.path, self.headers.get("Authorization", ""), body)
        if code != 200:
            endpoint.on_refused(code, reply["message"])
        data = json.dumps(reply).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_POST = do_GET = do_PUT = do_PATCH = do_DELETE = _serve

    def log_message(self, format: str, *args: Any) -> None:
        pass  # run-local prints what was applied, not an access log
