"""Hostile desired state against the real `gitdns orchestrator` process: real HTTP nodes on
127.0.0.x and a real dnsmasq serving what it delivers (dnsmasq reads CoreDNS's hosts format).

After it serves a good tenant, one commit's worth of attacks lands in the desired directory: a
tenant named ``"evil\\n"``, a tenant claiming ``cluster.local``, one claiming ``com``, and a node
whose ip is ``999.1.1.1``.  The process must keep running, keep serving the good tenant from
the pool's last good version, serve a good tenant added after them, and serve none of the
hostile names.  CI=true turns a missing dnsmasq into a failure.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from tests.e2e.orchestrator_kit import Dnsmasq, free_port, start_nodes, tenant_yaml, wait_for, write_desired
from tests.e2e.test_orchestrator import require_dnsmasq

POOL = "edge"
API = "api.tenant-a.test"
EVIL = ("apiVersion: gitdns.io/v1alpha1\nkind: Tenant\nmetadata: {name: \"evil\\n\"}\n"
        "spec:\n  nodePool: edge\n  domains: [x.evil.test]\n")


def test_hostile_tenants_and_a_bad_node_address_do_not_stop_the_pool(tmp_path: Path) -> None:
    binary = require_dnsmasq()
    nodes = start_nodes(3, first=41)
    desired, out = tmp_path / "desired", tmp_path / "out"
    write_desired(desired, POOL, nodes, {"tenant-a": [API]}, interval=0.2, timeout=0.2)
    dnsmasq = Dnsmasq(out, tmp_path, binary).start()
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gitdns.cli", "orchestrator", "--repo", str(desired), "--node-pool", POOL,
         "--out", str(out), "--listen", "", "--admin-listen", f"127.0.0.1:{port}",
         "--state-dir", str(tmp_path / "state"),
         "--poll-interval", "0.2", "--signal-pid-file", str(dnsmasq.pid_file), "--probe-allow-ranges", "127.0.0.0/8"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def status() -> dict[str, Any]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=2) as response:
                return dict(json.loads(response.read()))
        except (urllib.error.URLError, OSError):
            return {}

    everyone = {n.ip for n in nodes}
    try:
        wait_for(lambda: dnsmasq.answers(API) == everyone, what="tenant-a served by all three nodes")
        (desired / "evil.yaml").write_text(EVIL)
        (desired / "grab.yaml").write_text(tenant_yaml("grab", POOL, ["kubernetes.default.svc.cluster.local"],
                                                       zone="cluster.local")
                                           + "---\n" + tenant_yaml("tld", POOL, ["google.com"], zone="com"))
        pool = (desired / "nodepool.yaml").read_text()
        (desired / "nodepool.yaml").write_text(pool.replace(f"ip: {nodes[2].ip},", "ip: 999.1.1.1,"))
        wait_for(lambda: any("999.1.1.1" in n for n in status().get("notes", ())), what="the bad address noted")
        (desired / "tenant-b.yaml").write_text(tenant_yaml("tenant-b", POOL, ["shop.tenant-b.test"]))
        wait_for(lambda: dnsmasq.answers("shop.tenant-b.test") == everyone, what="tenant-b served after the attacks")
        assert proc.poll() is None, "the orchestrator exited"
        assert dnsmasq.answers(API) == everyone  # the pool's last good version: node 3 still published
        for name in ("kubernetes.default.svc.cluster.local", "google.com", "x.evil.test"):
            assert dnsmasq.answers(name) == set(), name
        now = status()
        assert now["total_nodes"] == 3 and "delivery" not in now["errors"]
        assert {r["tenant"] for r in now["refused"]} >= {"grab", "tld"}
        assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == [
            "gitdns-edge.server", "tenant-a.hosts", "tenant-b.hosts"]
        server = (out / "gitdns-edge.server").read_text()
        assert "cluster.local" not in server and "com:53" not in server and "evil" not in server
    finally:
        proc.terminate()
        proc.wait(10)
        dnsmasq.stop()
        for node in nodes:
            node.stop()
