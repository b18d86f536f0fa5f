"""A Zone of ``type: endpoint`` end to end, through the command line: example-repo/ with
example.com held in a Kuadrant DNSRecord on the fake Kubernetes API — it validates, `apply`
writes the whole layout into the resource's ``spec.endpoints``, and the next `plan` is empty."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitdns.cli import EXIT_OK, main
from gitdns.core.endpoints import records_from_endpoints
from tests.fakes.kube_apiserver import FakeKube

pytest.importorskip("kubernetes.client")

ROOT = Path(__file__).resolve().parents[2]
DNSR = ("kuadrant.io", "v1alpha1", "dnsrecords")
NS = "dns-zones"
ZONE = """\
apiVersion: gitdns.io/v1alpha1
kind: Zone
metadata:
  name: example-com
spec:
  domain: example.com
  provider:
    type: endpoint
    settings:
      namespace: dns-zones
      kubeconfigContext: fake
      ENDPOINT_GVR: kuadrant.io/v1alpha1.dnsrecords
      ENDPOINT_ZONE_RECORD_LABEL: kuadrant.io/zone-record=true
"""


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    kube = FakeKube()
    kube.register(*DNSR, kind="DNSRecord")
    kube.create("", "v1", "namespaces", {"metadata": {"name": NS}})
    kube.create(*DNSR, {"metadata": {"name": "example-com", "namespace": NS,
                                     "labels": {"kuadrant.io/zone-record": "true"}},
                        "spec": {"rootHost": "example.com", "endpoints": []}})
    kube.start()
    yield kube
    kube.stop()


@pytest.fixture
def repo(tmp_path: Path, fake: FakeKube, monkeypatch: pytest.MonkeyPatch) -> Path:
    dest = tmp_path / "repo"
    shutil.copytree(ROOT / "example-repo", dest, ignore=shutil.ignore_patterns(".gitdns"))
    (dest / "zones" / "example-com.yaml").write_text(ZONE)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
        f"clusters: [{{name: fake, cluster: {{server: '{fake.base_url}'}}}}]\n"
        "users: [{name: fake, user: {token: x}}]\n"
        "contexts: [{name: fake, context: {cluster: fake, user: fake}}]\n")
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    return dest


def endpoints(fake: FakeKube) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = fake.get(*DNSR, "example-com", namespace=NS)["spec"]["endpoints"]
    return found


def test_an_endpoint_zone_validates_applies_and_then_plans_nothing(
        repo: Path, fake: FakeKube, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(repo)]) == EXIT_OK, capsys.readouterr().out
    assert main(["apply", "--repo", str(repo), "--all-clusters"]) == EXIT_OK, capsys.readouterr().out
    records = {(r.name, r.type, r.set_id): r for r in records_from_endpoints(endpoints(fake))}
    assert records[("api.example.com", "CNAME", "")].values == ("klb.api.example.com",)
    geo_rows = [r for (name, rtype, set_id), r in records.items() if name == "klb.api.example.com" and set_id]
    assert geo_rows and all(r.geo for r in geo_rows)  # the loadbalanced layout, routing kept
    assert any(rtype == "TXT" and name.startswith("kuadrant-") for name, rtype, _ in records)
    assert main(["plan", "--repo", str(repo), "--all-clusters", "--exit-code"]) == EXIT_OK, capsys.readouterr().out


def test_an_endpoint_zone_without_its_namespace_is_a_validation_problem_and_nothing_is_written(
        repo: Path, fake: FakeKube, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "zones" / "example-com.yaml").write_text(ZONE.replace("      namespace: dns-zones\n", ""))
    assert main(["validate", str(repo)]) != EXIT_OK
    assert "provider endpoint needs spec.provider.settings namespace" in capsys.readouterr().out
    assert main(["apply", "--repo", str(repo), "--all-clusters"]) != EXIT_OK
    assert endpoints(fake) == []
