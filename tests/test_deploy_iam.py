"""deploy/iam/route53-policy.json: exactly the Route53 actions the `route53` provider calls,
scoped to resources where IAM allows it.

The provider runs against `FakeRoute53` through everything it can do (find the hosted zone by
name, read, write, wait for INSYNC, create, tag, find and delete health checks); every
operation it sent, and every operation its code can send, is an action of the policy, and
the policy holds no other.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from gitdns.core import builder
from gitdns.providers.route53.provider import Route53Provider
from tests.core import worked_example as we
from tests.providers.conformance import Conformance
from tests.providers.route53_fake import FakeRoute53

ROOT = Path(__file__).resolve().parent.parent
POLICY = ROOT / "deploy" / "iam" / "route53-policy.json"
ZONE = "example.com"
# What IAM can scope each action to (the service authorization reference for Route 53):
# "*" for actions that take no resource.
RESOURCE = {
    "ListHostedZones": r"\*",
    "CreateHealthCheck": r"\*",
    "ListResourceRecordSets": r"arn:aws:route53:::hostedzone/Z[0-9A-Z]+",
    "ChangeResourceRecordSets": r"arn:aws:route53:::hostedzone/Z[0-9A-Z]+",
    "GetChange": r"arn:aws:route53:::change/\*",
    "GetHealthCheck": r"arn:aws:route53:::healthcheck/\*",
    "DeleteHealthCheck": r"arn:aws:route53:::healthcheck/\*",
    "ChangeTagsForResource": r"arn:aws:route53:::healthcheck/\*",
    "ListTagsForResource": r"arn:aws:route53:::healthcheck/\*",
}


def action(operation: str) -> str:
    """boto3's operation name -> the IAM action (list_hosted_zones -> route53:ListHostedZones)."""
    return "route53:" + "".join(part.capitalize() for part in operation.split("_"))


def policy() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(POLICY.read_text())
    return doc


def statements() -> list[dict[str, Any]]:
    return list(policy()["Statement"])


def granted_actions() -> set[str]:
    out: set[str] = set()
    for statement in statements():
        actions = statement["Action"]
        out.update([actions] if isinstance(actions, str) else actions)
    return out


def operations_in_the_code() -> set[str]:
    """Every operation the provider's modules send through their `_call`."""
    found: set[str] = set()
    for path in (ROOT / "gitdns" / "providers" / "route53").glob("*.py"):
        found.update(re.findall(r'_call\(\s*"([a-z_]+)"', path.read_text()))
    return found


def run_the_provider() -> set[str]:
    """The operations sent while the provider does all it can, the fake counting them."""
    fake = FakeRoute53(insync_after=1)
    fake.add_zone(ZONE, apex=False)
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    # No hostedZoneId: the zone is found by name (ListHostedZones); waitInsync and healthChecks on.
    provider = Route53Provider(ZONE, fake, wait_insync=True, health_checks=True, sleep=sleep, clock=lambda: now[0])
    state = we.STATE
    for cluster in (we.CLUSTER_A, we.CLUSTER_B):
        Conformance().sync(provider, ZONE, cluster.id, builder.desired_for_zone(state, cluster, state.zones[0]))
    assert fake.health_checks
    Conformance().sync(provider, ZONE, we.CLUSTER_B.id, [])  # B's rows go, and their health checks
    return {op for op, count in fake.calls.items() if count}


def test_the_policy_grants_exactly_what_the_provider_calls() -> None:
    sent = run_the_provider()
    assert sent == operations_in_the_code(), "the run misses a call site, or calls something new"
    assert {action(op) for op in sent} == granted_actions()


def test_every_action_is_scoped_as_narrowly_as_iam_allows() -> None:
    for statement in statements():
        assert statement["Effect"] == "Allow" and "NotAction" not in statement and "NotResource" not in statement
        resources = statement["Resource"]
        resources = [resources] if isinstance(resources, str) else resources
        actions = statement["Action"]
        for name in [actions] if isinstance(actions, str) else actions:
            service, _, short = name.partition(":")
            assert service == "route53" and "*" not in short, name
            for resource in resources:
                assert re.fullmatch(RESOURCE[short], resource), f"{name}: {resource}"


def test_the_policy_is_what_the_docs_name() -> None:
    readme = (ROOT / "deploy" / "README.md").read_text()
    assert "deploy/iam/route53-policy.json" in readme or "iam/route53-policy.json" in readme
    for name in granted_actions():
        assert name.split(":")[1] in readme, f"deploy/README.md does not explain {name}"
    assert policy()["Version"] == "2012-10-17"
