"""Progress into the TrainJob's status.trainerStatus: the Trainer's status endpoint contract (TLS with the injected
CA, the bearer token, the payload against the TrainJob CRD), the reporter's bounded rate, and an endpoint that hangs
or fails costing the training thread nothing, down to a real 2-rank torchrun run."""

from __future__ import annotations

import http.client
import itertools
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, SOURCES_PATH, dist_file
from kubetrain.local.certificates import throwaway_ca
from kubetrain.local.status_endpoint import StatusEndpoint, progress_line

from kubetrain_runtime.progress import ENV_CA_CERT, ENV_TOKEN, ENV_URL, ProgressReporter, rfc3339

pytest.importorskip("cryptography", reason="the endpoint's throwaway CA needs cryptography: pip install -e '.[train]'")

TOKEN = "a-projected-token"


@pytest.fixture
def trainjob() -> dict:
    return yaml.safe_load(dist_file("dev", "TrainJob", "tiny-gpt").read_text())


@pytest.fixture
def tls(tmp_path):
    return throwaway_ca(tmp_path / "tls")


def post(url: str, ca: Path | None, body: bytes, authorization: str | None = f"Bearer {TOKEN}",
         method: str = "POST", path: str | None = None) -> tuple[int, dict]:
    host, _, rest = url.removeprefix("https://").partition("/")
    context = ssl.create_default_context(cafile=str(ca) if ca else None)
    connection = http.client.HTTPSConnection(host, context=context, timeout=10)
    headers = {"Content-Type": "application/json", **({"Authorization": authorization} if authorization else {})}
    connection.request(method, path or f"/{rest}", body=body, headers=headers)
    response = connection.getresponse()
    return response.status, json.loads(response.read())


def payload(**status) -> bytes:
    return json.dumps({"trainerStatus": {"lastUpdatedTime": rfc3339(), **status}}).encode()


def test_the_endpoint_answers_as_the_trainers_does(trainjob, tls):
    with StatusEndpoint(trainjob, tls, TOKEN) as endpoint:
        url, ca = endpoint.url, tls.ca_cert
        good = {"progressPercentage": 45, "estimatedRemainingSeconds": 120,
                "metrics": [{"name": "loss", "value": "0.123"}]}
        body = payload(**good)  # one timestamp: the reply echoes the body that was sent
        assert post(url, ca, body) == (200, json.loads(body))
        assert endpoint.status["progressPercentage"] == 45 and len(endpoint.received) == 1
        assert post(url, ca, payload(**good), authorization=f"bearer   {TOKEN}")[0] == 200  # the scheme, any case
        # The token: missing, wrong, or this job's token on another job's endpoint.
        assert post(url, ca, payload(**good), authorization=None)[0] == 403
        assert post(url, ca, payload(**good), authorization="Bearer another")[0] == 403
        other = url.replace(f"/trainjobs/{trainjob['metadata']['name']}/", "/trainjobs/other/")
        assert post(other, ca, payload(**good))[0] == 403
        assert post(url, ca, b"", path="/apis/other")[0] == 404
        assert post(url, ca, b"", method="GET")[0] == 405
        assert post(url, ca, b"x" * (70 * 1024))[0] == 413
        # What the Trainer's Go types refuse to decode, and what the TrainJob CRD refuses.
        refused = {b"not json": "Invalid payload",
                   payload(progressPercentage=45.5): "progressPercentage: 45.5 is not a 32-bit integer",
                   payload(estimatedRemainingSeconds=2**31): "is not a 32-bit integer",
                   payload(progressPercentage=101): "status.trainerStatus.progressPercentage: 101 is greater than",
                   payload(estimatedRemainingSeconds=-1): "status.trainerStatus.estimatedRemainingSeconds",
                   payload(metrics=[{"name": "loss", "value": "1" * 65}]): "status.trainerStatus.metrics[0].value",
                   payload(metrics=[{"name": "", "value": "1"}]): "status.trainerStatus.metrics[0].name",
                   payload(metrics=[{"name": "loss", "value": 0.5}]): "0.5 is not of type 'string'",
                   payload(metrics=[{"name": str(i), "value": "1"} for i in range(257)]): "is too long",
                   payload(progress=45): "'progress' was unexpected",
                   payload(lastUpdatedTime="2026-01-23 10:30"): "is not an RFC 3339 time",
                   json.dumps({"trainerStatus": {"progressPercentage": 1}}).encode():
                       "lastUpdatedTime is required when trainerStatus is present"}
        for body, message in refused.items():
            code, reply = post(url, ca, body)
            assert (code, reply["kind"], reply["code"]) == (422, "Status", 422), body
            assert message in reply["message"], (body, reply["message"])
        assert len(endpoint.received) == 2
        assert post(url, ca, b"{}") == (200, {})  # no trainerStatus: nothing to apply
        assert len(endpoint.received) == 2
        # The endpoint's certificate is the throwaway CA's: a client that trusts only the system's refuses it.
        with pytest.raises(ssl.SSLCertVerificationError):
            post(url, None, payload(**good))


def test_progress_line_says_what_the_status_holds():
    status = {"progressPercentage": 42, "estimatedRemainingSeconds": 12, "lastUpdatedTime": rfc3339(),
              "metrics": [{"name": "loss", "value": "2.31"}, {"name": "current_step", "value": "42"}]}
    assert progress_line(status) == "42 %, 12 s left: loss 2.31, current_step 42"


def step(n: int, loss: float = 3.0) -> dict:
    return {"event": "step", "step": n, "loss": loss, "lr": 1e-3, "tokens_per_s": 1000.0, "step_time_s": 0.01,
            "ettr": 0.9, "skipped_steps": 0}


def test_the_reporter_posts_the_newest_status_at_a_bounded_rate(trainjob, tls, tmp_path, capsys):
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    with StatusEndpoint(trainjob, tls, TOKEN) as endpoint:
        reporter = ProgressReporter(endpoint.url, str(tls.ca_cert), str(token), max_steps=200, interval_s=0.25)
        started = time.monotonic()
        for n in range(1, 201):
            reporter.observe(step(n, loss=5 - n / 100))
            if n == 100:
                reporter.observe({"event": "checkpoint", "tier": "durable", "step": 100})
                # The kubelet rotates the projected token, atomically (a symlink swap): the reporter reads the
                # file again for every post. The endpoint turns to the new token in the same instant.
                (tmp_path / "token.new").write_text("rotated")
                os.replace(tmp_path / "token.new", token)
                endpoint.token = "rotated"
            time.sleep(0.01)
        reporter.observe({**step(200, loss=3.0), "event": "finished"})
        reporter.close()
        elapsed = time.monotonic() - started
    posts = endpoint.received
    assert reporter.failed == 0 and reporter.posted == len(posts) and capsys.readouterr().err == ""
    # The first status goes at once, then at most one per interval, always the newest; the last one at once.
    assert 3 <= len(posts) <= elapsed / 0.25 + 2, (len(posts), elapsed)
    assert reporter.dropped >= 200 - len(posts)
    current = [int(next(m["value"] for m in p["metrics"] if m["name"] == "current_step")) for p in posts]
    assert current[0] == 1 and current == sorted(set(current)) and current[-1] == 200
    assert [p["progressPercentage"] for p in posts[:-1]] == [c * 100 // 200 for c in current[:-1]]
    final = {m["name"]: m["value"] for m in posts[-1]["metrics"]}
    assert posts[-1]["progressPercentage"] == 100 and posts[-1]["estimatedRemainingSeconds"] == 0
    assert final["loss"] == "3" and final["last_checkpoint_step"] == "100" and final["total_steps"] == "200"
    assert all(p["progressPercentage"] < 100 for p in posts[:-1])


class _HangingServer:
    """Accepts TCP connections and never answers: no TLS handshake, no response."""

    def __init__(self):
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.connections: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                self.connections.append(self.socket.accept()[0])
            except OSError:
                return

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.socket.getsockname()[1]}/apis/trainer.kubeflow.org/v1alpha1/namespaces/" \
               "ml-dev/trainjobs/tiny-gpt/status"

    def close(self):
        self.socket.close()
        for connection in self.connections:
            connection.close()


def test_a_hanging_endpoint_costs_the_training_thread_nothing(tls, tmp_path, capsys):
    (tmp_path / "token").write_text(TOKEN)
    server = _HangingServer()
    try:
        reporter = ProgressReporter(server.url, str(tls.ca_cert), str(tmp_path / "token"), max_steps=500,
                                    interval_s=0.05, timeout_s=1.0)
        started = time.monotonic()
        for n in range(1, 501):
            reporter.observe(step(n))
        handing_over = time.monotonic() - started
        reporter.observe({**step(500), "event": "finished"})
        started = time.monotonic()
        reporter.close()
        closing = time.monotonic() - started
    finally:
        server.close()
    # 500 hand-overs took no post's time (each post waits up to its 1 s timeout); close waits one timeout at most.
    assert handing_over < 0.5 and closing < 1.5, (handing_over, closing)
    assert reporter.posted == 0 and reporter.dropped >= 499
    warnings = capsys.readouterr().err.splitlines()
    assert len(warnings) == 1 and "TrainJob progress not delivered" in warnings[0] and "timed out" in warnings[0]


def test_a_failing_endpoint_or_another_ca_is_one_warning(trainjob, tls, tmp_path, capsys):
    (tmp_path / "token").write_text("not-the-token")
    with StatusEndpoint(trainjob, tls, TOKEN) as endpoint:
        reporter = ProgressReporter(endpoint.url, str(tls.ca_cert), str(tmp_path / "token"), max_steps=50,
                                    interval_s=0.01)
        for n in range(1, 51):
            reporter.observe(step(n))
            time.sleep(0.005)
        reporter.close()
        assert reporter.failed >= 2 and endpoint.received == []
        warnings = capsys.readouterr().err.splitlines()
        assert len(warnings) == 1 and "HTTP 403 Forbidden" in warnings[0]
        # A CA that did not sign the endpoint's certificate: verification fails, nothing is sent.
        other = throwaway_ca(tmp_path / "other")
        reporter = ProgressReporter(endpoint.url, str(other.ca_cert), str(tmp_path / "token"), max_steps=50)
        reporter.observe(step(1))
        reporter.close()
        warnings = capsys.readouterr().err.splitlines()
        assert len(warnings) == 1 and "CERTIFICATE_VERIFY_FAILED" in warnings[0]


def test_no_variables_no_reporter_and_a_url_needs_its_token():
    assert ProgressReporter.from_env(10, {}) is None
    with pytest.raises(ValueError, match=ENV_TOKEN):
        ProgressReporter.from_env(10, {ENV_URL: "https://127.0.0.1:1/status"})
    with pytest.raises(ValueError, match="not an https:// URL"):
        ProgressReporter.from_env(10, {ENV_URL: "http://127.0.0.1:1/status", ENV_TOKEN: "/t"})


# -- a real run: two CPU ranks under torchrun ---------------------------------------------------------

TINY = {
    "model": {"vocab_size": 256, "dim": 32, "n_layers": 2, "n_heads": 4},
    "data": {"source": "synthetic", "seq_len": 32},
    "optimizer": {"lr": 1e-2, "min_lr": 1e-3, "warmup_steps": 3},
    "batch": {"global_size": 8, "micro_size": 2},
    "max_steps": 40, "seed": 7, "log_interval": 1,
    "metrics": {"port": 0},
}


def torchrun(tmp_path: Path, env: dict[str, str]) -> tuple[subprocess.CompletedProcess, list[tuple[float, dict]]]:
    """Train 2 ranks; rank 0's records with the time each line arrived."""
    pytest.importorskip("torch", reason="the training runtime needs torch")
    config = {**TINY, "checkpoint": {"dir": str(tmp_path / "ckpt"), "interval": 10, "keep": 2}}
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(config))
    full_env = {**os.environ, "PYTHONPATH": SOURCES_PATH, **env}
    process = subprocess.Popen([sys.executable, "-m", "kubetrain_runtime.torchrun", "--standalone",
                                "--nproc-per-node=2", "-m", "training", "--config", str(tmp_path / "run.yaml")],
                               cwd=ROOT, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stderr: list[str] = []
    reader = threading.Thread(target=lambda: stderr.extend(process.stderr), daemon=True)
    reader.start()
    records = [(time.monotonic(), json.loads(line)) for line in process.stdout if line.startswith("{")]
    process.wait(timeout=300)
    reader.join(timeout=10)
    return subprocess.CompletedProcess(process.args, process.returncode, "", "".join(stderr)), records


def endpoint_env(url: str, ca: Path, token: Path) -> dict[str, str]:
    return {ENV_URL: url, ENV_CA_CERT: str(ca), ENV_TOKEN: str(token)}


@pytest.mark.processes
def test_a_two_rank_run_reports_into_the_trainjob_status(trainjob, tls, tmp_path):
    (tmp_path / "token").write_text(TOKEN)
    refusals = []
    with StatusEndpoint(trainjob, tls, TOKEN, on_refused=lambda code, message: refusals.append(message)) as endpoint:
        result, records = torchrun(tmp_path, endpoint_env(endpoint.url, tls.ca_cert, tmp_path / "token"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "TrainJob progress" not in result.stderr and refusals == []
    posts, finished = endpoint.received, records[-1][1]
    assert finished["event"] == "finished" and finished["step"] == 40
    # Rank 0 alone posts: its first status at once, the last at the end, never two of one step.
    current = [int(next(m["value"] for m in p["metrics"] if m["name"] == "current_step")) for p in posts]
    assert len(posts) >= 2 and current[0] == 1 and current == sorted(set(current)) and current[-1] == 40
    training_s = records[-1][0] - records[0][0]
    assert len(posts) <= training_s / 5 + 2  # at most one per 5 s, besides the first and the last
    final = {m["name"]: m["value"] for m in posts[-1]["metrics"]}
    assert posts[-1]["progressPercentage"] == 100 and posts[-1]["estimatedRemainingSeconds"] == 0
    assert final["loss"] == f"{finished['loss']:.6g}" and final["current_step"] == "40"
    assert final["last_checkpoint_step"] == "40" and "tokens_per_second" in final and "ettr" in final
    assert "mfu" not in final  # a CPU has no known peak


@pytest.mark.parametrize("failure", ["hangs", "answers 500"])
@pytest.mark.processes
def test_a_broken_endpoint_does_not_slow_a_two_rank_run(tls, tmp_path, failure):
    (tmp_path / "token").write_text(TOKEN)
    if failure == "hangs":
        server = _HangingServer()
        url, close = server.url, server.close
    else:
        endpoint = StatusEndpoint({"metadata": {"namespace": "ml-dev", "name": "tiny-gpt"}}, tls, TOKEN)
        endpoint.answer = lambda *request: (500, {"message": "Internal error"})
        url, close = endpoint.start().url, endpoint.stop
    try:
        result, records = torchrun(tmp_path, endpoint_env(url, tls.ca_cert, tmp_path / "token"))
    finally:
        close()
    assert result.returncode == 0, result.stderr[-3000:]
    steps = [t for t, record in records if record["event"] == "step"]
    assert len(steps) == 40
    # A post waits up to 5 s for the endpoint; had the training thread waited with it, two step lines would be at
    # least that far apart. The bound is generous: a step of this model takes milliseconds.
    widest = max(b - a for a, b in itertools.pairwise(steps))
    assert widest < 2.5, widest
    warnings = [line for line in result.stderr.splitlines() if "TrainJob progress" in line]
    assert len(warnings) == 1, warnings
    assert ("timed out" if failure == "hangs" else "HTTP 500 Internal error") in warnings[0]
