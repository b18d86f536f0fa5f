"""Every fault kind the agent meets shows in /metrics and fires the shipped alert that names it
(issue 30, item 8; docs/agent.md, "Faults and alerts").

For each kind of `gitdns.agent.metrics.FAULT_KINDS` a scenario drives one agent into it: the
agent's own Runner (poll and validation jobs), its provider factory as `gitdns.agent.main`
builds it (`observed_factory` inside the request budget), a real git desired branch or status
branch where git is the fault (a bare repository refusing the push with a pre-receive hook, a
hook moving the branch under every push, a read-only deploy key and an unknown key on a real
sshd, a remote moved away, a force-push back), and a provider raising the error types the real
adapters raise.  Once a simulated minute the scenario runs the agent's jobs and scrapes the
real ``/metrics`` endpoint on loopback; the shipped PrometheusRule's alerts are then evaluated
on those scrapes (tests/alert_eval.py, ``for`` included) and the alert naming the kind must
fire.  A kind with no scenario, or none of whose alerts fires, fails.  No test here reads the
wall clock: the agent's clock is a fake one, a minute a step.
"""

from __future__ import annotations

import random
import urllib.request
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from gitdns.adapters.http.server import ADMIN_ROUTES, HttpServer
from gitdns.adapters.leases import Lease
from gitdns.agent.budget import Budgets
from gitdns.agent.config import AgentConfig
from gitdns.agent.cycle import Agent
from gitdns.agent.lease import TxtLease
from gitdns.agent.main import make_source
from gitdns.agent.metrics import FAULT_KINDS, PROVIDER_ERROR_KINDS, Metrics
from gitdns.agent.observed import observed_factory
from gitdns.agent.ports import AgentPorts, HealthSource
from gitdns.agent.publisher import StatusPublisher
from gitdns.agent.runner import Runner
from gitdns.core.model import Zone
from gitdns.core.records import Change, Guard, ZoneSnapshot
from gitdns.errors import (
    AuthError,
    ConfigError,
    PermanentError,
    RetryableError,
    ThrottledError,
    TimedOutError,
    UnreachableError,
)
from gitdns.providers.base import ApplyResult, Provider
from gitdns.providers.memory import MemoryProvider
from tests.agent.fakes import ROOT, Clock, FakeSource, example_files
from tests.agent.test_health_cycle import FakeHealth, with_health_check
from tests.alert_eval import Timeline, firing, rules
from tests.e2e.agent_kit import DesiredRepo, git
from tests.e2e.faults_kit import record_set
from tests.e2e.git_fixtures import sshd_fixture  # noqa: F401  (the real sshd, session-wide)
from tests.e2e.git_servers import SshServer, decline_pushes, init_bare, keygen

CLUSTER = "eu-west-1"
ZONE = "example.com"
STEPS = 32  # simulated minutes after the first cycle: more than every alert's `for` (30m at most)
RULE = ROOT / "deploy" / "components" / "prometheus-rule" / "prometheusrule.yaml"


def shipped_alerts() -> list[dict[str, Any]]:
    return rules(YAML(typ="safe").load(RULE.read_text()))


# --- a provider that fails as the real adapters do ---------------------------------------------


class FaultyProvider(MemoryProvider):
    """The `memory` store, failing as ``fault`` says with the error types (and results) the
    real adapters produce: each fault on every pass, so that it keeps coming."""

    def __init__(self, fault: str | None = None) -> None:
        super().__init__()
        self.fault = fault
        self.reads = 0
        self.applies = 0

    def read(self, zone: str, names: Collection[str] | None = None) -> ZoneSnapshot:
        self.reads += 1
        if self.fault == "connection":
            raise UnreachableError("route53: cannot reach Route53 (ConnectionClosedError: connection reset by peer)")
        if self.fault == "auth":
            raise AuthError("route53: ListResourceRecordSets: AccessDenied (check the credentials and their IAM "
                            "permissions)")
        if self.fault == "throttled" and self.reads % 2:  # the budget waits it out and reads again
            raise ThrottledError("route53: ListResourceRecordSets: Throttling: Rate exceeded", retry_after=0.0)
        return super().read(zone, names) if names is not None else super().read(zone)

    def apply(self, zone: str, changes: Sequence[Change], guards: Sequence[Guard] = ()) -> ApplyResult:
        self.applies += 1
        groups = list(dict.fromkeys(c.group for c in changes))
        if self.fault == "timeout":  # before the write took effect, then after it
            if self.applies % 2:
                super().apply(zone, changes, guards)
            raise TimedOutError("route53: ChangeResourceRecordSets: no answer from Route53 in time (ReadTimeoutError)")
        if self.fault == "server_error":
            raise RetryableError("route53: ChangeResourceRecordSets: ServiceUnavailable: please retry")
        if self.fault == "unexpected":  # a bug in an adapter: the pass is taken back
            raise KeyError("ChangeInfo")
        if self.fault == "rejected":
            raise PermanentError("Cloud DNS answered HTTP 400 invalid: the change is not valid")
        if self.fault == "change_refused":
            return ApplyResult(failed=tuple((g, f"{g}: the server refused this content (REFUSED)") for g in groups))
        if self.fault == "partial_batch" and len(groups) > 1:  # the first batch landed, the next failed
            first = [c for c in changes if c.group == groups[0]]
            done = super().apply(zone, first, [g for g in guards if g.group == groups[0]])
            return ApplyResult(applied=done.applied, failed=tuple(
                (g, f"{g}: route53 refused the change: InvalidChangeBatch") for g in groups[1:]))
        if self.fault == "stale_write" and self.applies % 2:  # the read was stale: refused, re-read, re-planned
            return ApplyResult(refused=tuple((g, f"{g}: the zone changed since it was read") for g in groups))
        return super().apply(zone, changes, guards)


# --- one agent, its Runner and its /metrics on loopback ------------------------------------------


@dataclass
class Harness:
    tmp: Path
    source: Any = None  # a FakeSource (default: example-repo's files)
    desired: Path | None = None  # else a real desired branch: this bare repository
    fault: str | None = None
    status_repo: str = ""  # a real status branch remote; empty: no status push
    lease: Lease | None = None
    probes: HealthSource | None = None
    config: dict[str, Any] = field(default_factory=dict)
    broken_zone: str | None = None  # its provider cannot be built (a ConfigError)
    clock: Clock = field(default_factory=lambda: Clock(1_700_000_000.0))
    pages: list[tuple[float, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.metrics = Metrics()
        self.providers: dict[str, FaultyProvider] = {}
        cfg = AgentConfig(repo=str(self.desired or "mem://"), cluster=CLUSTER,
                          state_dir=str(self.tmp / "state"), status=bool(self.status_repo),
                          status_repo=self.status_repo, poll_interval=60.0, listen="",
                          admin_listen="127.0.0.1:0", **self.config)
        if self.desired is not None:
            self.source = make_source(cfg)  # as the agent builds it
        elif self.source is None:
            self.source = FakeSource()
            self.source.commit(example_files(), "initial")

        def plain(zone: Zone) -> Provider:
            if zone.domain == self.broken_zone:
                raise ConfigError(f"zone {zone.domain}: spec.provider.credentials: no variable GITDNS_TEST_UNSET "
                                  "is set in the agent's environment")
            return self.providers.setdefault(zone.domain, FaultyProvider(self.fault if zone.domain == ZONE else None))

        budgets = Budgets(lambda: 1, sleep=lambda _seconds: None)
        ports = AgentPorts(source=self.source, factory=observed_factory(plain, self.metrics, budgets.wrap),
                           clock=self.clock, rng=random.Random(7), lease=self.lease, probes=self.probes,
                           status=StatusPublisher(cfg) if self.status_repo else None)
        self.agent = Agent(cfg, ports)
        self.runner = Runner(self.agent, cfg, self.metrics, wall=self.clock)
        self.http = HttpServer("127.0.0.1", 0, metrics=self.metrics, status=self.runner.status,
                               ready=lambda: self.agent.serving, routes=ADMIN_ROUTES,
                               name="admin")
        self.http.start()

    def scrape(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http.port}/metrics", timeout=10) as answer:
            page = answer.read().decode()
        self.pages.append((self.clock(), page))
        return page

    def start(self) -> None:
        self.runner.first()
        self.scrape()

    def minute(self, change: Callable[[int], None] | None = None) -> None:
        """A minute passes: the scenario's change, the poll, the validation loop when due, a scrape."""
        self.clock.advance(60.0)
        if change is not None:
            change(len(self.pages))
        self.runner.poll()
        if self.agent.validation_due():
            self.runner.validate()
        self.scrape()

    def run(self, change: Callable[[int], None] | None = None) -> list[dict[str, str]]:
        """Start, then `rest`."""
        self.start()
        return self.rest(change)

    def rest(self, change: Callable[[int], None] | None = None) -> list[dict[str, str]]:
        """`STEPS` minutes; the shipped alerts firing at the end, evaluated on every scrape."""
        try:
            for _ in range(STEPS):
                self.minute(change)
        finally:
            self.http.stop()
        timeline = Timeline.of(self.pages)
        return [alert for rule in shipped_alerts() for alert in firing(rule, timeline)]

    def condition(self, kind: str) -> tuple[bool, str]:
        report = self.agent.last_report
        assert report is not None
        found = next(c for c in report.conditions if c.type == kind)
        return found.status, found.reason


def new_record(source: FakeSource) -> Callable[[int], None]:
    """Each minute a commit with two new RecordSets in example.com: two change groups to apply."""
    def change(n: int) -> None:
        files = dict(source.commits[source.head])
        for i in (0, 1):
            name = f"fault-{n}-{i}.example.com"
            files[f"records/fault-{n}-{i}.yaml"] = (
                "apiVersion: gitdns.io/v1alpha1\nkind: RecordSet\nmetadata:\n"
                f"  name: fault-{n}-{i}\nspec:\n  zone: example-com\n  records:\n"
                f"    - {{name: {name}, type: A, values: [192.0.2.{n % 200 + 1}]}}\n")
        source.commit(files, f"minute {n}")
    return change


def fires(alerts: list[dict[str, str]], name: str, **labels: str) -> bool:
    return any(a["alertname"] == name and all(a.get(k) == v for k, v in labels.items()) for a in alerts)


def names(alerts: list[dict[str, str]]) -> list[tuple[str, ...]]:
    return sorted({(a["alertname"], a.get("kind", ""), a.get("reason", "")) for a in alerts})


# --- the scenarios: one per fault kind ------------------------------------------------------------


def provider_fault(kind: str) -> Callable[[Path, Any], list[dict[str, str]]]:
    def scenario(tmp: Path, _request: Any) -> list[dict[str, str]]:
        h = Harness(tmp, fault=kind)
        alerts = h.run(new_record(h.source))
        assert h.metrics.value("gitdns_provider_errors_total", {"zone": ZONE, "kind": kind}), kind
        assert h.metrics.value("gitdns_provider_calls_total", {"zone": ZONE, "op": "read"})
        if kind not in ("throttled", "stale_write"):  # the others end the zone's pass in an error
            report = h.agent.last_report
            assert report is not None and any(z.zone == ZONE and z.error for z in report.zones), kind
        assert fires(alerts, "GitdnsProviderErrors", zone=ZONE, kind=kind), names(alerts)
        return alerts
    return scenario


def zone_error(tmp: Path, _request: Any) -> list[dict[str, str]]:
    h = Harness(tmp, broken_zone="example.org")
    alerts = h.run()
    assert fires(alerts, "GitdnsZoneErrors", zone="example.org", reason="InvalidConfiguration"), names(alerts)
    assert not fires(alerts, "GitdnsZoneErrors", zone=ZONE)  # the other zone is reconciled
    return alerts


def git_fetch(tmp: Path, _request: Any) -> list[dict[str, str]]:
    repo = DesiredRepo(tmp / "git")
    h = Harness(tmp, desired=repo.bare)
    h.start()
    repo.bare.rename(repo.bare.with_name("moved-away.git"))  # the remote goes away
    alerts = h.rest()
    assert h.condition("SourceAvailable") == (False, "RepositoryNotFound")
    assert (h.metrics.value("gitdns_git_errors_total", {"reason": "RepositoryNotFound"}) or 0) >= 2
    assert fires(alerts, "GitdnsGitErrors", reason="RepositoryNotFound"), names(alerts)
    return alerts


def head_refused(tmp: Path, _request: Any) -> list[dict[str, str]]:
    repo = DesiredRepo(tmp / "git")
    first = git("rev-parse", "HEAD", cwd=repo.work).strip()
    h = Harness(tmp, desired=repo.bare)
    h.start()
    repo.write("records/later.yaml", record_set("later.example.com", "A", ["192.0.2.9"]))
    later = repo.commit("a later revision")
    h.minute()
    assert h.agent.state.applied_sha == later
    repo.force_push(first)  # the branch forced back past the applied revision
    alerts = h.rest()
    assert h.condition("SourceAvailable") == (False, "RollbackRefused")
    assert h.metrics.value("gitdns_head_refusals_total", {"reason": "RollbackRefused"}) == 1  # once per head
    assert h.metrics.value("gitdns_head_refusals_total", {"reason": "SignatureRefused"}) == 0
    assert fires(alerts, "GitdnsHeadRefused", reason="RollbackRefused"), names(alerts)
    return alerts


def push_failing(h: Harness, reason: str) -> list[dict[str, str]]:
    alerts = h.run()
    assert h.condition("StatusPublished") == (False, reason)
    assert h.condition("Ready") == (False, reason)  # until a push succeeds
    assert h.metrics.value("gitdns_ready") == 0
    assert (h.metrics.value("gitdns_status_push_failures_total", {"reason": reason}) or 0) >= 2
    assert h.metrics.value("gitdns_condition", {"type": "StatusPublished", "reason": reason}) == 0
    assert fires(alerts, "GitdnsStatusPushFailing", reason=reason), names(alerts)
    assert fires(alerts, "GitdnsNotReady"), names(alerts)
    return alerts


def push_declined_by_a_hook(tmp: Path, _request: Any) -> list[dict[str, str]]:
    bare = init_bare(tmp / "status.git")
    decline_pushes(bare, "GitLab: You are not allowed to push code to protected branches on this project.")
    return push_failing(Harness(tmp, status_repo=str(bare)), "PushDeclined")


# A second writer: before every push lands, the hook moves the status branch on (outside the
# push's quarantine), so every push is refused as not a fast-forward of the tip it was built on.
RACING_HOOK = """#!/bin/sh
unset GIT_QUARANTINE_PATH GIT_OBJECT_DIRECTORY GIT_ALTERNATE_OBJECT_DIRECTORIES
export GIT_AUTHOR_NAME=other GIT_AUTHOR_EMAIL=other@example.com GIT_COMMITTER_NAME=other \
GIT_COMMITTER_EMAIL=other@example.com
while read old new ref; do
    tip=$(git rev-parse -q --verify "$ref")
    tree=$(git mktree </dev/null)
    if [ -n "$tip" ]; then commit=$(echo other | git commit-tree "$tree" -p "$tip")
    else commit=$(echo other | git commit-tree "$tree"); fi
    git update-ref "$ref" "$commit"
done
exit 0
"""


def push_raced(tmp: Path, _request: Any) -> list[dict[str, str]]:
    bare = init_bare(tmp / "status.git")
    hook = bare / "hooks" / "pre-receive"
    hook.write_text(RACING_HOOK)
    hook.chmod(0o755)
    return push_failing(Harness(tmp, status_repo=str(bare)), "StatusPushRaced")


def push_read_only_key(tmp: Path, request: Any) -> list[dict[str, str]]:
    sshd: SshServer = request.getfixturevalue("sshd")
    bare = sshd.create_repo(f"status-ro-{tmp.name}")
    h = Harness(tmp, status_repo=sshd.url(bare),
                config={"ssh_key": str(sshd.readonly_key), "known_hosts": str(sshd.known_hosts)})
    return push_failing(h, "PushDeclined")


def push_key_refused(tmp: Path, request: Any) -> list[dict[str, str]]:
    sshd: SshServer = request.getfixturevalue("sshd")
    bare = sshd.create_repo(f"status-auth-{tmp.name}")
    stranger = keygen(tmp / "stranger_key", "not-authorised")
    h = Harness(tmp, status_repo=sshd.url(bare),
                config={"ssh_key": str(stranger), "known_hosts": str(sshd.known_hosts)})
    return push_failing(h, "AuthenticationFailed")


def lease_lost(tmp: Path, _request: Any) -> list[dict[str, str]]:
    clock = Clock(1_700_000_000.0)
    shared = FaultyProvider()
    other = TxtLease(shared, ZONE, "3f6c2b9e", duration=600, clock=clock, identity="gitdns-other-pod")
    assert other.acquire().held
    h = Harness(tmp, clock=clock, lease=TxtLease(shared, ZONE, "3f6c2b9e", duration=600, clock=clock,
                                                 identity="gitdns-0"))
    alerts = h.run(lambda _n: other.acquire())  # the other holder renews its lease
    assert h.condition("LeaseHeld") == (False, "LeaseHeldByAnother")
    assert fires(alerts, "GitdnsLeaseLost", reason="LeaseHeldByAnother"), names(alerts)
    return alerts


def validation(tmp: Path, _request: Any) -> list[dict[str, str]]:
    h = Harness(tmp)
    h.start()
    files = dict(h.source.commits[h.source.head])
    files["records/broken.yaml"] = ("apiVersion: gitdns.io/v1alpha1\nkind: RecordSet\nmetadata:\n  name: broken\n"
                                    "spec:\n  zone: example-com\n  records:\n"
                                    "    - {name: broken.example.com, type: A, values: [not-an-address]}\n")
    h.source.commit(files, "a record that does not validate")
    alerts = h.rest()
    report = h.agent.last_report
    assert report is not None and any(z.held for z in report.zones)
    assert fires(alerts, "GitdnsValidationProblems"), names(alerts)
    return alerts


def probe(tmp: Path, _request: Any) -> list[dict[str, str]]:
    health = FakeHealth()
    source = FakeSource()
    source.commit(with_health_check(example_files()), "health checks")
    h = Harness(tmp, source=source, probes=health)
    h.start()
    addresses = sorted({t.address for t in health.targets})
    assert len(addresses) > 1, addresses
    health.down = {addresses[0]}  # one target fails its probes; the others answer
    health.changed = True
    alerts = h.rest()
    assert h.condition("Healthy") == (False, "TargetsWithdrawn")
    assert fires(alerts, "GitdnsTargetsUnhealthy", reason="TargetsWithdrawn"), names(alerts)
    return alerts


SCENARIOS: dict[str, Callable[[Path, Any], list[dict[str, str]]]] = {
    **{f"provider:{kind}": provider_fault(kind) for kind in PROVIDER_ERROR_KINDS},
    "zone-error": zone_error,
    "git-fetch": git_fetch,
    "head-refused": head_refused,
    "status-push": push_declined_by_a_hook,
    "lease-lost": lease_lost,
    "validation": validation,
    "probe": probe,
}
# more causes of one kind, each driven for real
CAUSES: dict[str, Callable[[Path, Any], list[dict[str, str]]]] = {
    "status-push: non-fast-forward": push_raced,
    "status-push: read-only deploy key": push_read_only_key,
    "status-push: key refused": push_key_refused,
}


def test_every_fault_kind_has_a_scenario() -> None:
    assert set(SCENARIOS) == set(FAULT_KINDS)


@pytest.mark.parametrize("kind", sorted(FAULT_KINDS))
def test_each_fault_kind_fires_its_alert(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    scenario = SCENARIOS.get(kind)
    assert scenario is not None, f"fault kind {kind} has no scenario (and so no alert shown to fire)"
    scenario(tmp_path, request)


@pytest.mark.parametrize("cause", sorted(CAUSES))
def test_each_cause_of_a_failed_status_push_fires_its_alert(cause: str, tmp_path: Path,
                                                           request: pytest.FixtureRequest) -> None:
    CAUSES[cause](tmp_path, request)


def test_a_healthy_agent_fires_nothing(tmp_path: Path) -> None:
    bare = init_bare(tmp_path / "status.git")
    h = Harness(tmp_path, status_repo=str(bare))
    alerts = h.run(new_record(h.source))
    assert h.condition("Ready") == (True, "ReconcileSucceeded")
    assert alerts == []
    assert h.metrics.value("gitdns_status_push_failures_total", {"reason": "PushDeclined"}) == 0


def test_a_status_push_that_succeeds_again_makes_the_agent_ready(tmp_path: Path) -> None:
    bare = init_bare(tmp_path / "status.git")
    hook = decline_pushes(bare)
    h = Harness(tmp_path, status_repo=str(bare))
    h.start()
    for _ in range(3):
        h.minute()
    assert h.metrics.value("gitdns_ready") == 0
    hook.unlink()
    h.runner.poke("push refs/heads/gitdns-status/other")  # a webhook ends the push's backoff
    h.minute()
    h.http.stop()
    assert h.condition("StatusPublished") == (True, "StatusPushed")
    assert h.condition("Ready") == (True, "ReconcileSucceeded")
    assert h.metrics.value("gitdns_ready") == 1
