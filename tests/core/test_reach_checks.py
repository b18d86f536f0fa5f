"""`gitdns validate` refuses, with file:line, the probe targets a daemon refuses under its default
settings (gitdns/core/checks/reach.py ``probe_targets``): a node endpoint on another host than the
node's ip, and a node ip or a health-checked gateway address in a class no probe reaches (loopback,
link-local, cloud metadata, unspecified, multicast, broadcast, reserved).  The problems hold no zone.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gitdns.adapters.repo import load_schemas, read_tree
from gitdns.cli import main
from gitdns.core.problems import Problem
from gitdns.core.validate import CHECKS, check

HEAD = "apiVersion: gitdns.io/v1alpha1\n"
ZONE = HEAD + "kind: Zone\nmetadata: {name: ex}\nspec:\n  domain: example.com\n  provider: {type: local}\n"


def pool(*nodes: str) -> str:
    return HEAD + "kind: NodePool\nmetadata: {name: edge}\nspec:\n  nodes:\n" + "".join(nodes)


def node(name: str, ip: str, endpoint: str | None = None) -> str:
    text = f"    - name: {name}\n      ip: \"{ip}\"\n"
    return text + (f"      healthEndpoint: \"{endpoint}\"\n" if endpoint else "")


def cluster(*addresses: str) -> str:
    quoted = ", ".join(f'"{a}"' for a in addresses)
    return (HEAD + "kind: Cluster\nmetadata: {name: c1}\nspec:\n  id: cluster-one-1\n  gateways:\n"
            f"    - name: gw\n      namespace: ns\n      addresses: [{quoted}]\n"
            "      listeners: [{hostname: api.example.com}]\n")


def policy(health: bool = True, exclude: str = "") -> str:
    text = HEAD + "kind: DNSPolicy\nmetadata: {name: p}\nspec:\n  targetRef: {gateway: gw}\n"
    if exclude:
        text += f"  excludeAddresses: [\"{exclude}\"]\n"
    return text + ("  healthCheck: {protocol: HTTP, port: 80}\n" if health else "")


def refused(files: dict[str, str]) -> list[Problem]:
    return [p for p in check(files, load_schemas()).problems if p.code in ("ProbeTargetRefused",
                                                                            "InvalidHealthEndpoint")]


def test_the_check_is_one_validate_runs_and_the_example_repository_passes_it() -> None:
    from gitdns.core.checks.reach import probe_targets

    assert probe_targets in CHECKS
    root = Path(__file__).resolve().parents[2] / "example-repo"
    assert refused(read_tree(root)) == []


@pytest.mark.parametrize(("ip", "endpoint", "why"), [
    ("10.0.0.1", "http://169.254.169.254/latest/meta-data/", "is not the node's ip"),
    ("10.0.0.1", "http://127.0.0.1:15021/healthz/ready", "is not the node's ip"),
    ("10.0.0.1", "http://10.0.0.2:15021/healthz/ready", "is not the node's ip"),
    ("10.0.0.1", "http://node-1.example.com:15021/", "is not the node's ip"),
    ("10.0.0.1", "http://[::ffff:10.0.0.1]:15021/", "is not the node's ip"),
    ("10.0.0.1", "tcp://10.0.0.1", "needs a port"),
])
def test_a_node_endpoint_on_another_host_is_refused_at_its_line(ip: str, endpoint: str, why: str) -> None:
    [problem] = refused({"pool.yaml": pool(node("ok", "10.0.0.9"), node("n1", ip, endpoint))})
    assert (problem.file, problem.line, problem.yaml_path) == ("pool.yaml", 10, "spec.nodes[1].healthEndpoint")
    assert why in problem.message and problem.zones == () and not problem.blocks_all


@pytest.mark.parametrize(("ip", "kind"), [
    ("127.0.0.1", "loopback"), ("169.254.169.254", "cloud metadata"), ("169.254.10.1", "link-local"),
    ("0.0.0.0", "unspecified"), ("224.0.0.5", "multicast"), ("255.255.255.255", "broadcast"),
    ("::1", "loopback"), ("fd00:ec2::254", "cloud metadata"), ("::ffff:127.0.0.1", "loopback"),
    ("fe80::1", "link-local"),
])
def test_a_node_ip_no_probe_reaches_by_default_is_refused_naming_the_setting(ip: str, kind: str) -> None:
    [problem] = refused({"pool.yaml": pool(node("ok", "10.0.0.9"), node("n1", ip))})
    assert (problem.line, problem.yaml_path, problem.code) == (9, "spec.nodes[1].ip", "ProbeTargetRefused")
    assert f"{kind} address" in problem.message and "--probe-allow-ranges" in problem.hint
    assert "GITDNS_PROBE_ALLOW_RANGES" in problem.hint


def test_a_gateway_address_a_health_check_probes_is_refused() -> None:
    files = {"zone.yaml": ZONE, "c.yaml": cluster("192.0.2.1", "127.0.0.1", "169.254.169.254", "lb.example.net"),
             "p.yaml": policy()}
    found = refused(files)
    assert [(p.file, p.line, p.yaml_path) for p in found] == [
        ("c.yaml", 9, "spec.gateways[0].addresses[1]"), ("c.yaml", 9, "spec.gateways[0].addresses[2]")]
    assert "loopback address" in found[0].message and "cloud metadata address" in found[1].message
    assert all(p.zones == () for p in found)  # a daemon refuses the probe; it holds no zone for it
    # not probed: no health check, or the address excluded
    assert refused({**files, "p.yaml": policy(health=False)}) == []
    assert [p.yaml_path for p in refused({**files, "p.yaml": policy(exclude="127.0.0.0/8")})] == [
        "spec.gateways[0].addresses[2]"]


def test_validate_fails_on_it_with_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pool.yaml").write_text(pool(node("n1", "10.0.0.1", "http://169.254.169.254/latest/")))
    assert main(["validate", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "pool.yaml:8: spec.nodes[0].healthEndpoint" in out and "is not the node's ip" in out


def test_validate_takes_the_ranges_the_operator_gives_the_daemons(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """An operator who lets the daemons probe loopback gives validate the same setting: the
    loopback node passes, another host's endpoint is still refused (no range lifts that)."""
    (tmp_path / "pool.yaml").write_text(pool(node("n1", "127.0.0.5"), node("n2", "10.0.0.2", "http://10.0.0.3/")))
    monkeypatch.delenv("GITDNS_PROBE_ALLOW_RANGES", raising=False)
    assert main(["validate", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "127.0.0.5 is a loopback address" in out and "--probe-allow-ranges" in out
    assert main(["validate", str(tmp_path), "--probe-allow-ranges", "127.0.0.0/8"]) == 1
    out = capsys.readouterr().out
    assert "loopback" not in out and "is not the node's ip" in out
    monkeypatch.setenv("GITDNS_PROBE_ALLOW_RANGES", "127.0.0.0/8")
    main(["validate", str(tmp_path)])
    assert "loopback" not in capsys.readouterr().out
    assert main(["validate", str(tmp_path), "--probe-allow-ranges", "127.0.0.0/99"]) == 1
    assert "--probe-allow-ranges (GITDNS_PROBE_ALLOW_RANGES): '127.0.0.0/99'" in capsys.readouterr().err
