"""The orchestrator with a hostile NodePool (docs/security.md, "Probes reach only the node's or
gateway's own address" and "Secrets the repository names are read only when listed").

The orchestrator runs as `gitdns orchestrator` wires it in a pod (the fake Kubernetes API of
tests/fakes, the real prober), with the operator's ``--probe-allow-ranges 127.0.0.2/32`` (its one
legitimate node lives there) and ``--headers-secrets gitdns-probe-headers``.  The NodePool, as a
pull request writes it, points nodes at a loopback HTTP server that records every connection, at
the cloud metadata address, at the unspecified address, at another host than the node's ip, and
names the git credential's Secret as its ``headersSecret``.  Nothing reaches the recording server,
no connection is attempted anywhere but the legitimate node, and the git credential's Secret is
never asked of the API.  Every connection the prober makes goes through a spy that refuses (and
records) anything outside loopback, so no packet leaves the machine even if the gate failed.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitdns.orchestrator.config import config_from_flags
from gitdns.orchestrator.service import Orchestrator
from gitdns.orchestrator.wiring import build
from tests.e2e.orchestrator_kit import tenant_yaml, wait_for
from tests.fakes.kube_apiserver import FakeKube
from tests.orchestrator.kube_kit import in_pod
from tests.probe_kit import RecordingServer, loopback_spy

pytest.importorskip("kubernetes")

NS = "failover"
KEY = "-----BEGIN OPENSSH PRIVATE KEY----- not-a-real-key-5f3c"  # the git credential's content
LISTED = "gitdns-probe-headers"


@pytest.fixture
def connects(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every address the prober connects to; anything outside loopback is refused by the spy, so no
    packet leaves the machine whatever happens."""
    return loopback_spy(monkeypatch)


@pytest.fixture
def trap() -> Iterator[RecordingServer]:
    with RecordingServer("127.0.0.1") as server:
        yield server


@pytest.fixture
def node() -> Iterator[RecordingServer]:
    with RecordingServer("127.0.0.2") as server:
        yield server


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeKube]:
    with FakeKube() as kube:
        in_pod(kube, tmp_path, monkeypatch, NS)
        kube.create("", "v1", "secrets", {"metadata": {"name": "gitdns-git-ssh", "namespace": NS},
                                          "stringData": {"ssh-privatekey": KEY}}, NS)
        kube.create("", "v1", "secrets", {"metadata": {"name": LISTED, "namespace": NS},
                                          "stringData": {"X-Probe": "for-the-nodes"}}, NS)
        yield kube


def hostile_pool(trap: RecordingServer, node: RecordingServer, headers_secret: str | None) -> str:
    """A NodePool whose every node but ``good`` points its probe somewhere it must not go."""
    t = trap.port
    nodes = [
        ("good", "127.0.0.2", f"http://127.0.0.2:{node.port}/healthz"),  # its own address, allowed by the operator
        ("loopback", "127.0.0.1", f"http://127.0.0.1:{t}/"),  # loopback the operator did not allow
        ("mapped", "::ffff:127.0.0.1", f"http://[::ffff:127.0.0.1]:{t}/"),  # the same, IPv4-mapped
        ("unspecified", "0.0.0.0", f"http://0.0.0.0:{t}/"),  # reaches the host itself
        ("other-host", "127.0.0.2", f"http://127.0.0.1:{t}/"),  # another host than its ip
        ("metadata", "169.254.169.254", "http://169.254.169.254/latest/meta-data/"),
        ("metadata-endpoint", "127.0.0.2", "http://169.254.169.254/latest/meta-data/iam/"),
        ("aws-v6", "fd00:ec2::254", "http://[fd00:ec2::254]/latest/meta-data/"),
    ]
    lines = ["apiVersion: gitdns.io/v1alpha1", "kind: NodePool", "metadata: {name: edge}", "spec:", "  nodes:"]
    lines += [f"    - {{name: {n}, ip: \"{ip}\", healthEndpoint: \"{url}\"}}" for n, ip, url in nodes]
    check = "interval: 0.2, timeout: 0.2, failureThreshold: 1, successThreshold: 1"
    lines.append(f"  healthCheck: {{{check}" + (f", headersSecret: {headers_secret}}}" if headers_secret else "}"))
    return "\n".join(lines) + "\n"


def start(tmp_path: Path, pool: str) -> tuple[Orchestrator, threading.Thread, Path]:
    desired = tmp_path / "desired"
    desired.mkdir(exist_ok=True)
    (desired / "pool.yaml").write_text(pool)
    (desired / "tenant.yaml").write_text(tenant_yaml("tenant-a", "edge", ["api.tenant-a.io"]))
    # the operator's settings, as the flags give them
    config = config_from_flags({"repo": str(desired), "node_pool": "edge", "out": str(tmp_path / "out"),
                                "state_dir": str(tmp_path / "state"), "lease": "none", "poll_interval": "0.2",
                                "probe_allow_ranges": "127.0.0.2/32", "headers_secrets": LISTED})
    orchestrator = build(config)
    thread = threading.Thread(target=orchestrator.run, daemon=True)
    thread.start()
    return orchestrator, thread, desired


def stop(orchestrator: Orchestrator, thread: threading.Thread) -> None:
    orchestrator.stopped.set()
    orchestrator.wake.set()
    thread.join(10)


def condition(o: Orchestrator, kind: str) -> dict[str, str]:
    return next(c for c in o.status()["conditions"] if c["type"] == kind)


def secret_gets(fake: FakeKube, name: str) -> list[str]:
    return [r.path for r in fake.requests if r.path.endswith(f"/secrets/{name}")] + \
           [str(f) for f in fake.forbidden if name in str(f)]


def test_probes_reach_only_the_nodes_own_allowed_address(
        fake: FakeKube, trap: RecordingServer, node: RecordingServer, connects: list[tuple[str, int]],
        tmp_path: Path) -> None:
    o, thread, _ = start(tmp_path, hostile_pool(trap, node, None))
    try:
        wait_for(lambda: len(node.requests) >= 5, timeout=20, what="the legitimate node probed, five times")
        status = o.status()
    finally:
        stop(o, thread)
    assert trap.connections == [] and trap.requests == []  # nothing was sent where the pool pointed
    assert set(connects) == {("127.0.0.2", node.port)}  # the one connection the operator allowed, and only it
    errors = {name: doc.get("probe_error", "") for name, doc in status["nodes"].items()}
    assert errors["good"] == "" and status["nodes"]["good"]["state"] == "healthy"
    for name in ("loopback", "mapped", "unspecified", "metadata", "aws-v6"):
        assert "--probe-allow-ranges" in errors[name], (name, errors[name])
    assert "loopback" in errors["loopback"] and "loopback" in errors["mapped"]
    assert "cloud metadata" in errors["metadata"] and "cloud metadata" in errors["aws-v6"]
    assert "unspecified" in errors["unspecified"]
    for name in ("other-host", "metadata-endpoint"):
        assert "is not the node's ip" in errors[name], (name, errors[name])
    probes = next(c for c in status["conditions"] if c["type"] == "ProbesConfigured")
    assert (probes["status"], probes["reason"]) == ("False", "ProbeTargetRefused")
    # refused nodes are not withdrawn for it (a configuration error), as an unreadable headersSecret
    assert "127.0.0.1" in status["published_ips"] and "169.254.169.254" in status["published_ips"]


def test_the_git_credential_named_as_headers_secret_is_never_read_nor_sent(
        fake: FakeKube, trap: RecordingServer, node: RecordingServer, connects: list[tuple[str, int]], tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    o, thread, desired = start(tmp_path, hostile_pool(trap, node, "gitdns-git-ssh"))
    try:
        wait_for(lambda: condition(o, "ProbesConfigured")["reason"] == "HeadersSecretNotListed", timeout=20,
                 what="the headersSecret refused")
        probes = condition(o, "ProbesConfigured")
        status = json.dumps(o.status())
        # the pool's nodes are not probed without their headers: nothing is sent at all
        assert node.requests == [] and trap.connections == [] and connects == []
        # then the operator's own Secret: headers go to the node's own address, and only there
        (desired / "pool.yaml").write_text(hostile_pool(trap, node, LISTED))
        wait_for(lambda: len(node.requests) >= 3, timeout=20, what="the node probed with the listed headers")
    finally:
        stop(o, thread)
    assert secret_gets(fake, "gitdns-git-ssh") == []  # never asked of the API
    assert secret_gets(fake, LISTED)  # the listed one was
    for words in ("gitdns-git-ssh", "--headers-secrets", "GITDNS_HEADERS_SECRETS", "nothing was read"):
        assert words in probes["message"], words
    assert KEY not in status and KEY not in caplog.text and "not-a-real-key" not in caplog.text
    assert all(r.get("X-Probe") == "for-the-nodes" for r in node.requests)
    assert not any(KEY in json.dumps(r) for r in node.requests)
    assert trap.connections == [] and set(connects) == {("127.0.0.2", node.port)}
