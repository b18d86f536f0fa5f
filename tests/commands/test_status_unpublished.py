"""A Cluster git names that never published a status: not ready, and neither are the policies
it has hosts for (they said Ready: "2/2 policies ready" while the cluster serving them had never run)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gitdns.commands.status.command import served_by, unpublished, with_unpublished
from gitdns.commands.status.view import to_text

ROOT = Path(__file__).resolve().parents[2]
WEST = "3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63"
CENTRAL = "8a1e47d2-0c3b-4f95-a6d8-71b2c9e05f34"


def example_files() -> dict[str, str]:
    base = ROOT / "example-repo"
    return {p.relative_to(base).as_posix(): p.read_text() for p in sorted(base.rglob("*.yaml"))
            if ".gitdns" not in p.parts}


def fleet() -> dict[str, Any]:
    """eu-central-1 published and is Ready for api; nothing else reported."""
    return {
        "clusters": {CENTRAL: {"cluster": "eu-central-1", "ready": True, "appliedRevision": "a" * 40, "upToDate": True,
                               "notOk": [], "heldZones": [], "errors": [], "zones": {}, "lag": None}},
        "policies": {"api": {"ready": True, "clusters": [CENTRAL], "lagging": [], "hosts": ["api.example.com"],
                             "messages": {}}},
        "ready": True,
        "counts": {"clusters": 1, "clustersReady": 1, "policies": 1, "policiesReady": 1},
    }


def test_the_policies_an_unpublished_cluster_serves_are_found_in_git() -> None:
    serving = served_by(example_files(), [{"cluster": "eu-west-1", "id": WEST}])
    assert serving["api"] == [WEST] and serving["web"] == [WEST]
    assert served_by(example_files(), [{"cluster": "nowhere", "id": None}]) == {}


def test_an_unpublished_cluster_makes_its_policies_not_ready() -> None:
    agg = fleet()
    waiting = [{"cluster": "eu-west-1", "id": WEST}]
    with_unpublished(agg, waiting, served_by(example_files(), waiting))
    api, web = agg["policies"]["api"], agg["policies"]["web"]
    assert not api["ready"] and api["lagging"] == [WEST] and api["messages"][WEST] == "no status yet"
    assert not web["ready"] and web["clusters"] == [WEST]  # only the cluster that never ran serves it
    assert agg["counts"] == {"clusters": 2, "clustersReady": 1, "clustersUnpublished": 1, "policies": 2,
                             "policiesReady": 0}
    assert not agg["ready"]
    text = to_text(agg)
    assert "api     NotReady  2         eu-west-1 (no status yet)" in text
    assert "1/2 clusters ready, 0/2 policies ready, 1 without a status yet — NOT READY" in text


def test_published_clusters_are_not_waiting() -> None:
    docs: list[tuple[str | None, str | None]] = [("eu-central-1", CENTRAL), ("eu-west-1", WEST), ("eu-west-1", WEST)]
    trees: dict[str, Any] = {}
    assert unpublished(trees, docs) == [{"cluster": "eu-central-1", "id": CENTRAL},
                                        {"cluster": "eu-west-1", "id": WEST}]
