"""``gitdns apply`` for a cluster whose gateways are discovered (no addresses in git) uses the
observation its agent last published (``gateways.yaml`` on its status branch), as the preview
does; with none published it refuses, rather than withdraw the gateway's records."""

from __future__ import annotations

from pathlib import Path

from gitdns.commands.apply import apply
from gitdns.core.status.report import gateway_entry
from gitdns.providers.local import LocalProvider
from tests.agent.test_gateway_discovery_preview import EU_WEST, publish, repo  # noqa: F401  (fixture)


def a_records(root: Path, name: str) -> set[str]:
    store = root / ".gitdns" / "zones"
    if not store.exists():
        return set()
    return {v for r in LocalProvider(store).read("example.com").records if r.name == name and r.type == "A"
            for v in r.values}


def test_apply_refuses_a_cluster_whose_discovered_gateway_was_never_observed(repo: Path) -> None:  # noqa: F811
    result = apply(repo, cluster="eu-west-1")
    assert result.code == 1
    err = "\n".join(result.err)
    assert "gateway(s) ingress/api-gw are discovered" in err and "would withdraw their records" in err
    assert a_records(repo, "api.example.com") == set()  # nothing was written


def test_apply_publishes_the_published_observation(repo: Path) -> None:  # noqa: F811
    publish(repo, EU_WEST, {"ingress/api-gw": gateway_entry("observed", "2030-01-02T03:04:05Z", ["192.0.2.77"],
                                                             [("api.example.com", "https")])})
    result = apply(repo, cluster="eu-west-1")
    err = "\n".join(result.err)
    assert "addresses observed by eu-west-1 at 2030-01-02T03:04:05Z" in err, err + "\n".join(result.out)
    assert "192.0.2.77" in "\n".join(result.out), "\n".join(result.out)
