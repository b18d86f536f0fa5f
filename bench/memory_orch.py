"""The orchestrator half of bench/bench_memory.py: a NodePool of N nodes whose health endpoints
a child process serves (one loopback address per node), and one orchestrator process driven
through answering, hanging and answering nodes and a tenant commit.

    python bench/memory_orch.py NODES     # the probe server alone (what ProbeServer starts)
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.memory_kit import ORCH_NAMESPACE, Cloud, Result, Watched, base_env, settings, wait_for  # noqa: E402
from tests.e2e.agent_kit import WorkTree, free_ports  # noqa: E402

INTERVAL, PROBE_TIMEOUT = 5.0, 2.0


def node_ip(i: int) -> str:
    """Node ``i``'s address: a node is probed at its own ip, so each has one on loopback."""
    return f"127.{1 + i // 62500}.{i // 250 % 250}.{i % 250 + 1}"


class ProbeServer:
    """The nodes' health endpoints, in a child process: one port on each node's own loopback
    address, answering ``/healthz/ready`` with 200 (then closing), or in ``hang`` mode accepting
    and reading but never answering."""

    def __init__(self, nodes: int) -> None:
        self.nodes = nodes
        self.proc = subprocess.Popen([sys.executable, __file__, str(nodes)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, cwd=ROOT, env=base_env())
        assert self.proc.stdout is not None
        self.port: int = json.loads(self.proc.stdout.readline())

    def mode(self, mode: str) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(mode + "\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == mode

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(30)


def serve_probes(nodes: int) -> None:
    """Child mode of ProbeServer."""
    import resource

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    state = {"mode": "answer"}
    held: set[asyncio.Transport] = set()

    class Endpoint(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            assert isinstance(transport, asyncio.Transport)
            self.transport, self.buf = transport, b""

        def data_received(self, data: bytes) -> None:
            self.buf += data
            if b"\r\n\r\n" not in self.buf:
                return
            if state["mode"] == "answer":
                self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                self.transport.close()
            else:
                held.add(self.transport)

        def connection_lost(self, exc: Exception | None) -> None:
            held.discard(self.transport)

    async def main() -> None:
        loop = asyncio.get_running_loop()
        first = await loop.create_server(Endpoint, node_ip(0), 0, backlog=1024)
        port = first.sockets[0].getsockname()[1]
        servers = [first]
        for i in range(1, nodes):
            servers.append(await loop.create_server(Endpoint, node_ip(i), port, backlog=1024))
        print(json.dumps(port), flush=True)
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            state["mode"] = line.strip()
            if state["mode"] == "answer":
                for transport in list(held):
                    transport.close()
            print(state["mode"], flush=True)
        for server in servers:
            server.close()

    asyncio.run(main())


def nodepool_yaml(nodes: int, port: int) -> str:
    lines = ["apiVersion: gitdns.io/v1alpha1", "kind: NodePool", "metadata: {name: big}", "spec:", "  nodes:"]
    lines += [f"    - {{name: n{i}, ip: {node_ip(i)}}}" for i in range(nodes)]
    lines.append(f"  healthCheck: {{protocol: HTTP, port: {port}, path: /healthz/ready, interval: {INTERVAL:g}, "
                 f"timeout: {PROBE_TIMEOUT:g}, failureThreshold: 2, successThreshold: 1}}")
    return "\n".join(lines) + "\n"


def tenant_yaml(domains: list[str]) -> str:
    return ("apiVersion: gitdns.io/v1alpha1\nkind: Tenant\nmetadata: {name: big-tenant}\n"
            f"spec: {{nodePool: big, zone: big.test, domains: [{', '.join(domains)}]}}\n")


def run_orchestrator(result: Result, nodes: int, work: Path, cloud: Cloud | None, probes: ProbeServer,
                     phase: float) -> None:
    """``cloud``: ConfigMap delivery and the Kubernetes Lease; None: --out and the file lease."""
    tree = WorkTree(work / "desired", work / "desired.git")
    tree.write("pool.yaml", nodepool_yaml(nodes, probes.port))
    domains = ["api.big.test", "app.big.test"]
    tree.write("tenant.yaml", tenant_yaml(domains))
    tree.commit("node pool")
    assert tree.bare is not None
    state, out = work / "state", work / "out"
    state.mkdir()
    (admin,) = free_ports(1)
    env = base_env()
    cmd = [sys.executable, "-m", "gitdns.cli", "orchestrator", "--repo", tree.bare.as_uri(), "--node-pool", "big",
           "--state-dir", str(state), "--listen", "", "--admin-listen", f"127.0.0.1:{admin}", "--poll-interval", "2s",
           "--git-timeout", "60s", "--probe-allow-ranges", "127.0.0.0/8"]
    if cloud is not None:  # deploy/orchestrator/base's settings
        cloud.cluster("00000000-0000-4000-8000-000000000000")
        env.update(settings(ROOT / "deploy" / "orchestrator" / "base" / "settings.env"))
        env.update(cloud.env())
        env.update({"GITDNS_POD_NAME": f"orch-{result.name}", "GITDNS_POD_NAMESPACE": ORCH_NAMESPACE})
    else:  # the sidecar component's
        out.mkdir()
        env.update(settings(ROOT / "deploy" / "orchestrator" / "components" / "sidecar" / "settings.env"))
        env["GITDNS_OUT"] = str(out)
    # The settings name a pool, a repository and an interval of their own; flags win over them.

    def delivered() -> str:
        if cloud is not None:
            data = cloud.kube.get("", "v1", "configmaps", "coredns-custom", "kube-system").get("data") or {}
            return "\n".join(str(v) for v in data.values())
        return "\n".join(p.read_text() for p in sorted(out.glob("*")) if p.is_file() and not p.name.startswith("."))

    def published(domain: str = "api.big.test") -> int:
        return sum(1 for line in delivered().splitlines() if domain in line.split()[1:])  # "IP NAME..." lines

    started = time.monotonic()
    probes.mode("answer")
    watched = Watched(cmd, env, work / "orchestrator.log")
    try:
        wait_for(lambda: published() == nodes, 180, watched, every=0.5)
        result.ready_rss = watched.rss()
        time.sleep(phase * 2)
        probes.mode("hang")
        time.sleep(phase * 3)
        fail_open = "fail_open=True" in watched.log.read_text(errors="replace")
        result.notes.append(f"published while every node hung: {published()} of {nodes}"
                            + (" (fail-open: every node down publishes them all)" if fail_open else ""))
        probes.mode("answer")
        wait_for(lambda: published() == nodes, 180, watched, every=0.5)
        tree.write("tenant.yaml", tenant_yaml([*domains, "www.big.test"]))
        tree.commit("a third domain")
        wait_for(lambda: published("www.big.test") == nodes, 180, watched, every=0.5)
        result.pushes += 1  # deliveries waited for: first, after the hang, after the commit
        result.cycles = 3
        result.ok = True
    except Exception as exc:  # reported; the other scenarios go on
        result.error = f"{type(exc).__name__}: {exc}"[:3000]
        result.notes.append(watched.tail(1500))
    finally:
        result.finish(watched)
        result.seconds = time.monotonic() - started
        code = watched.stop()
        if code not in (0, None) and result.ok:
            result.ok, result.error = False, f"orchestrator exited {code} on SIGTERM: {watched.tail()}"



if __name__ == "__main__":
    serve_probes(int(sys.argv[1]))
