"""The PolicyAffected condition on Gateways, against the fake Kubernetes API server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from gitdns.adapters.gateway.conditions import CONDITION_TYPE, MAX_ATTEMPTS, GatewayReporter, set_policy_affected
from gitdns.core.model import Cluster, Gateway
from gitdns.errors import StaleWriteError
from tests.fakes.kube_apiserver import FakeKube, Request

client = pytest.importorskip("kubernetes.client")

GW = ("gateway.networking.k8s.io", "v1", "gateways")
NS = "infra"
ACCEPTED = {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "by the implementation",
            "lastTransitionTime": "2024-01-01T00:00:00Z", "observedGeneration": 1}
T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    kube = FakeKube()
    kube.register(*GW, kind="Gateway")
    kube.create("", "v1", "namespaces", {"metadata": {"name": NS}})
    kube.start()
    yield kube
    kube.stop()


@pytest.fixture
def api(fake: FakeKube) -> Iterator[Any]:
    cfg = client.Configuration()
    cfg.host = fake.base_url
    with client.ApiClient(cfg) as api_client:
        yield api_client


def add_gateway(fake: FakeKube, name: str, conditions: list[dict[str, Any]] | None = None) -> None:
    fake.create(*GW, {"metadata": {"name": name, "namespace": NS},
                      "spec": {"gatewayClassName": "example", "listeners": []}})
    if conditions is not None:
        fake.mutate(*GW, name, lambda o: o.__setitem__("status", {"conditions": conditions}), namespace=NS)


def conditions(fake: FakeKube, name: str) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = fake.get(*GW, name, namespace=NS)["status"]["conditions"]
    return result


def ours(fake: FakeKube, name: str) -> dict[str, Any]:
    (condition,) = [c for c in conditions(fake, name) if c["type"] == CONDITION_TYPE]
    return condition


def test_adds_the_condition_next_to_the_others(fake: FakeKube, api: Any) -> None:
    add_gateway(fake, "gw", [ACCEPTED])
    assert set_policy_affected(api, namespace=NS, name="gw", affected=True, reason="PolicyApplied",
                               message="DNSPolicy p has been applied", clock=Clock())
    assert conditions(fake, "gw")[0] == ACCEPTED  # another controller's condition survives, in place
    assert ours(fake, "gw") == {
        "type": "gateway.networking.k8s.io/PolicyAffected", "status": "True", "reason": "PolicyApplied",
        "message": "DNSPolicy p has been applied", "lastTransitionTime": "2023-11-14T22:13:20Z",
        "observedGeneration": 1,
    }
    assert fake.count("PUT", "/gateways/gw/status") == 1
    assert fake.count("PUT", "/gateways/gw") == 0  # never the main resource


def test_the_same_values_again_write_nothing(fake: FakeKube, api: Any) -> None:
    add_gateway(fake, "gw")
    clock = Clock()
    args: dict[str, Any] = {"namespace": NS, "name": "gw", "affected": True, "reason": "PolicyApplied",
                            "message": "applied", "clock": clock}
    assert set_policy_affected(api, **args)
    rv = fake.get(*GW, "gw", namespace=NS)["metadata"]["resourceVersion"]
    clock.now += 60
    assert set_policy_affected(api, **args)
    assert fake.count("PUT") == 1
    assert fake.get(*GW, "gw", namespace=NS)["metadata"]["resourceVersion"] == rv


def test_last_transition_time_moves_only_when_the_status_does(fake: FakeKube, api: Any) -> None:
    add_gateway(fake, "gw")
    clock = Clock()
    set_policy_affected(api, namespace=NS, name="gw", affected=True, reason="PolicyApplied", message="a",
                        clock=clock)
    clock.now += 60
    set_policy_affected(api, namespace=NS, name="gw", affected=True, reason="PolicyApplied", message="b",
                        observed_generation=7, clock=clock)
    assert ours(fake, "gw")["lastTransitionTime"] == "2023-11-14T22:13:20Z"
    assert (ours(fake, "gw")["message"], ours(fake, "gw")["observedGeneration"]) == ("b", 7)
    clock.now += 60
    set_policy_affected(api, namespace=NS, name="gw", affected=False, reason="PolicyInvalid", message="c",
                        clock=clock)
    assert ours(fake, "gw")["lastTransitionTime"] == "2023-11-14T22:15:20Z"
    assert ours(fake, "gw")["status"] == "False"
    assert len(conditions(fake, "gw")) == 1  # replaced, never duplicated


def test_a_concurrent_write_is_retried_and_both_changes_survive(fake: FakeKube, api: Any) -> None:
    add_gateway(fake, "gw", [ACCEPTED])
    programmed = {"type": "Programmed", "status": "True", "reason": "Programmed", "message": "",
                  "lastTransitionTime": "2024-01-01T00:00:00Z", "observedGeneration": 1}
    interfered = []

    def other_controller(request: Request) -> None:
        # Between our read and our write, the implementation adds its Programmed condition.
        if request.method == "PUT" and not interfered:
            interfered.append(request.path)
            fake.mutate(*GW, "gw", lambda o: o["status"]["conditions"].append(programmed), namespace=NS)

    fake.add_hook(other_controller)
    assert set_policy_affected(api, namespace=NS, name="gw", affected=True, reason="PolicyApplied",
                               message="applied", clock=Clock())
    assert interfered
    types = [c["type"] for c in conditions(fake, "gw")]
    assert types == ["Accepted", "Programmed", CONDITION_TYPE]
    assert fake.count("PUT", "/status") == 2 and fake.count("GET", "/gateways/gw") == 2


def test_endless_conflicts_give_up_with_a_stale_write_error(fake: FakeKube, api: Any) -> None:
    add_gateway(fake, "gw")

    def always(request: Request) -> None:
        if request.method == "PUT":
            fake.mutate(*GW, "gw", lambda o: o.setdefault("status", {}).update(bumped=request.path), namespace=NS)

    fake.add_hook(always)
    with pytest.raises(StaleWriteError):
        set_policy_affected(api, namespace=NS, name="gw", affected=True, reason="PolicyApplied", message="x")
    assert fake.count("PUT") == MAX_ATTEMPTS


def test_a_missing_gateway_is_false(fake: FakeKube, api: Any) -> None:
    assert set_policy_affected(api, namespace=NS, name="nope", affected=True, reason="PolicyApplied",
                               message="x") is False
    assert fake.count("PUT") == 0


def test_the_reason_is_from_the_closed_set(api: Any) -> None:
    with pytest.raises(ValueError, match="reason"):
        set_policy_affected(api, namespace=NS, name="gw", affected=True, reason="Applied", message="x")


def cluster(*names: str) -> Cluster:
    return Cluster(name="eu", id="uid-1", gateways=tuple(Gateway(n, NS, ("1.1.1.1",), ()) for n in names))


def test_reporter_writes_changes_only(fake: FakeKube, api: Any) -> None:
    for name in ("a", "b"):
        add_gateway(fake, name, [ACCEPTED])
    reporter = GatewayReporter(api, clock=Clock())
    policy_of = {(NS, "a"): "pa", (NS, "b"): "pb", (NS, "gone"): "pa"}
    members = cluster("a", "b", "c", "gone")  # c: no policy; gone: no Gateway object
    assert reporter.report(members, {"pa": True, "pb": False}, policy_of) == {
        (NS, "a"): "set", (NS, "b"): "set", (NS, "gone"): "missing"}
    assert ours(fake, "a")["reason"] == "PolicyApplied" and ours(fake, "a")["status"] == "True"
    assert ours(fake, "b")["reason"] == "PolicyInvalid" and ours(fake, "b")["status"] == "False"
    assert "preserved" in ours(fake, "b")["message"]
    assert fake.count("PUT") == 2
    requests = len(fake.requests)
    assert reporter.report(members, {"pa": True, "pb": False}, policy_of) == {
        (NS, "a"): "unchanged", (NS, "b"): "unchanged", (NS, "gone"): "missing"}
    assert len(fake.requests) == requests + 1  # only the missing Gateway is looked up again
    assert reporter.report(members, {"pa": True, "pb": True}, policy_of)[(NS, "b")] == "set"
    assert ours(fake, "b")["status"] == "True" and fake.count("PUT") == 3
    # A policy without a verdict leaves its Gateways alone.
    assert reporter.report(members, {"pb": True}, policy_of) == {(NS, "b"): "unchanged"}


def test_reporter_survives_api_failures(fake: FakeKube, api: Any) -> None:
    add_gateway(fake, "a")

    def always(request: Request) -> None:
        if request.method == "PUT":
            fake.mutate(*GW, "a", lambda o: o.setdefault("status", {}).update(bumped=len(fake.requests)),
                        namespace=NS)

    fake.add_hook(always)
    reporter = GatewayReporter(api, clock=Clock())
    assert reporter.report(cluster("a"), {"p": True}, {(NS, "a"): "p"}) == {(NS, "a"): "failed"}
    fake.clear_hooks()
    assert reporter.report(cluster("a"), {"p": True}, {(NS, "a"): "p"}) == {(NS, "a"): "set"}  # tried again
