"""Git failing or refusing the head never stops the agent: the last good (verified) revision stays
in force, zone-side work keeps its schedule, only git operations back off, and a webhook, a
rotated credential or a new head ends the wait."""

from __future__ import annotations

import random
from pathlib import Path

from gitdns.adapters.git.verify import SignatureRefusedError
from gitdns.agent.config import AgentConfig
from gitdns.agent.cycle import Agent
from gitdns.agent.ports import AgentPorts
from gitdns.core.groups import direct_changes, read_zone_groups
from gitdns.core.model import Zone
from gitdns.core.records import RecordKey
from gitdns.core.status.report import ClusterReport
from gitdns.errors import AuthError, UnreachableError
from gitdns.providers.base import Provider
from gitdns.providers.memory import MemoryProvider
from tests.agent.fakes import Clock, FakeFetched, FakeSource, example_files
from tests.agent.test_groups_cycle import HOST, repo

CLUSTER = "eu-west-1"


class SigningSource(FakeSource):
    """A FakeSource whose fetch refuses the commits listed in ``unsigned``, as GitSource with a
    VerifyPolicy does; ``auth_broken`` makes every git operation fail as refused credentials."""

    def __init__(self) -> None:
        super().__init__()
        self.unsigned: set[str] = set()
        self.auth_broken = False

    def remote_head(self) -> str:
        if self.auth_broken:
            self.calls.append("remote_head")
            raise AuthError("credentials refused: Permission denied (publickey)", reason="AuthenticationFailed")
        return super().remote_head()

    def fetch(self, sha: str | None = None) -> FakeFetched:
        fetched = super().fetch(sha)
        if fetched.sha in self.unsigned:
            raise SignatureRefusedError(f"commit {fetched.sha} refused: no signature", sha=fetched.sha,
                                        why="no signature")
        return fetched


class Sink:
    """A status branch that can be made to fail."""

    def __init__(self) -> None:
        self.up = True
        self.pushed: list[ClusterReport] = []
        self.attempts = 0
        self.applied: str | None = None

    def publish(self, report: ClusterReport) -> str | None:
        self.attempts += 1
        if not self.up:
            raise UnreachableError("git push failed: connection refused")
        self.pushed.append(report)
        self.applied = report.applied_revision
        return "c0ffee"


def make(source: FakeSource, tmp: Path, clock: Clock, providers: dict[str, MemoryProvider], *, sink: Sink | None = None,
         cluster: str = CLUSTER, **config: object) -> Agent:
    def factory(zone: Zone) -> Provider:
        return providers.setdefault(zone.domain, MemoryProvider())

    restore = (lambda _cluster_id: sink.applied) if sink is not None else None
    cfg = AgentConfig(repo="mem://", cluster=cluster, state_dir=str(tmp), **config)  # type: ignore[arg-type]
    return Agent(cfg, AgentPorts(source=source, factory=factory, clock=clock, rng=random.Random(1), status=sink,
                                 restore=restore))


def condition(agent: Agent, kind: str) -> tuple[bool, str, str]:
    report = agent.last_report
    assert report is not None
    found = next(c for c in report.conditions if c.type == kind)
    return found.status, found.reason, found.message


def values(provider: MemoryProvider, zone: str = "example.com") -> dict[RecordKey, tuple[str, ...]]:
    return {r.key: r.values for r in provider.read(zone).records if not r.name.startswith(("kuadrant-", "gitdns-"))}


# -- a refused head ---------------------------------------------------------------------------


def test_an_unsigned_head_is_refused_and_the_last_verified_revision_stays(tmp_path: Path) -> None:
    source, clock, providers = SigningSource(), Clock(), {}  # type: ignore[var-annotated]
    good = source.commit(example_files(), "signed")
    agent = make(source, tmp_path, clock, providers, sink=Sink())
    agent.run()
    before = values(providers["example.com"])
    files = example_files()
    files["clusters/eu-west-1.yaml"] = files["clusters/eu-west-1.yaml"].replace("192.0.2.", "203.0.113.")
    bad = source.commit(files, "unsigned")
    source.unsigned.add(bad)
    agent.run()  # no exception: the refusal is reported
    assert values(providers["example.com"]) == before
    assert agent.state.applied_sha == good
    status, reason, message = condition(agent, "SourceAvailable")
    assert (status, reason) == (False, "SignatureRefused")
    assert good[:7] in message and "stays in force" in message
    assert condition(agent, "Ready")[:2] == (False, "SignatureRefused")
    # the refused head is not fetched again on every poll
    source.calls.clear()
    agent.run()
    assert source.calls == ["remote_head"]
    # a new signed head is taken at the next poll: no backoff in between
    fixed = source.commit(example_files(), "signed again")
    agent.run()
    assert agent.state.applied_sha == fixed
    assert condition(agent, "SourceAvailable")[0] and condition(agent, "Ready")[0]


def test_restarted_on_an_unsigned_head_serves_the_verified_revision_from_the_status_branch(tmp_path: Path) -> None:
    source, clock, providers, sink = SigningSource(), Clock(), {}, Sink()  # type: ignore[var-annotated]
    good = source.commit(example_files(), "signed")
    make(source, tmp_path / "a", clock, providers, sink=sink).run()
    assert sink.applied == good
    files = example_files()
    files["clusters/eu-west-1.yaml"] = files["clusters/eu-west-1.yaml"].replace("192.0.2.", "203.0.113.")
    source.unsigned.add(source.commit(files, "unsigned"))
    before = values(providers["example.com"])
    # a fresh start: a new state directory, nothing in memory; only the status branch knows
    restarted = make(source, tmp_path / "b", clock, providers, sink=sink)
    restarted.run("start", force=True)
    assert restarted.state.current is not None and restarted.state.applied_sha == good
    assert values(providers["example.com"]) == before
    status, reason, message = condition(restarted, "SourceAvailable")
    assert (status, reason) == (False, "SignatureRefused") and f"{good[:7]} stays in force" in message


def test_restarted_on_an_unsigned_head_with_nothing_verified_reports_and_waits(tmp_path: Path) -> None:
    source, clock, providers = SigningSource(), Clock(), {}  # type: ignore[var-annotated]
    source.unsigned.add(source.commit(example_files(), "unsigned"))
    agent = make(source, tmp_path, clock, providers, sink=Sink())
    agent.run("start", force=True)  # no exception: the agent stays up
    assert agent.state.current is None and not providers
    status, reason, message = condition(agent, "SourceAvailable")
    assert (status, reason) == (False, "SignatureRefused") and "no verified revision" in message
    signed = source.commit(example_files(), "signed")
    agent.run()
    assert agent.state.applied_sha == signed


# -- git down ---------------------------------------------------------------------------------


def test_git_down_only_git_backs_off_and_a_break_glass_switch_is_followed(tmp_path: Path) -> None:
    """The remote is unreachable for long: every poll goes on from the last good revision,
    follows the zone's active-groups record after `groups set --direct`, and tries git only
    when its backoff allows."""
    sites = {"a1": ("site-a", "192.0.2.11"), "b1": ("site-b", "198.51.100.11")}
    source, clock, providers = FakeSource(), Clock(), {}  # type: ignore[var-annotated]
    source.commit(repo(["site-a"], 1, sites))
    agents = {name: make(source, tmp_path / name, clock, providers, cluster=name, poll_interval=5.0,
                         validate_delay=600.0, quiet_period=3600.0)  # no validation pass comes to help
              for name in sites}
    for agent in agents.values():
        agent.run()
    zone = providers["example.com"]
    assert values(zone)[RecordKey(HOST, "A")] == ("192.0.2.11",)
    source.up = False
    for _ in range(6):  # git keeps failing; its backoff grows past the poll interval
        clock.advance(5.0)
        for agent in agents.values():
            agent.run()
    assert 3 <= agents["a1"].state.git_wait.failures < 6  # tried less often than polled
    assert agents["a1"].next_git_attempt() is not None
    state = read_zone_groups(zone.read("example.com"), "example.com")
    _serial, changes = direct_changes(state, "example.com", ["site-b"], git_serial=1)
    assert zone.apply("example.com", changes).ok
    source.calls.clear()
    clock.advance(5.0)  # one poll interval
    for agent in agents.values():
        agent.run()
    assert values(zone)[RecordKey(HOST, "A")] == ("198.51.100.11",)
    status, reason, _ = condition(agents["b1"], "GroupsDivergedFromGit")
    assert status and reason == "ZoneSerialAhead"
    assert condition(agents["b1"], "SourceAvailable")[:2] == (False, "GitUnreachable")


def test_a_webhook_or_a_rotated_credential_ends_the_git_backoff(tmp_path: Path) -> None:
    source, clock, providers = SigningSource(), Clock(), {}  # type: ignore[var-annotated]
    source.commit(example_files(), "initial")
    token = tmp_path / "token"
    token.write_text("old\n")
    agent = make(source, tmp_path / "state", clock, providers, token_file=str(token))
    agent.run()
    source.auth_broken = True
    for _ in range(8):
        clock.advance(float(agent.next_git_attempt() or 0.0) + 0.01)
        agent.run()
    assert agent.state.git_wait.failures == 8
    assert condition(agent, "SourceAvailable")[:2] == (False, "AuthenticationFailed")
    waiting = agent.next_git_attempt()
    assert waiting is not None and waiting > 60
    source.calls.clear()
    agent.run()
    assert source.calls == []  # backing off
    token.write_text("rotated\n")  # the Secret is rotated (a new file)
    source.auth_broken = False
    agent.run()
    assert source.calls[:1] == ["remote_head"] and condition(agent, "SourceAvailable")[0]
    assert agent.state.git_wait.failures == 0
    # and a webhook delivery
    source.auth_broken = True
    for _ in range(8):
        clock.advance(float(agent.next_git_attempt() or 0.0) + 0.01)
        agent.run()
    source.auth_broken = False
    source.calls.clear()
    agent.run()
    assert source.calls == []
    agent.git_kicked()
    agent.run()
    assert source.calls[:1] == ["remote_head"] and agent.state.git_wait.failures == 0


# -- status push ------------------------------------------------------------------------------


def test_a_failed_status_push_is_retried_on_its_own_backoff_by_an_idle_poll(tmp_path: Path) -> None:
    source, clock, providers, sink = FakeSource(), Clock(), {}, Sink()  # type: ignore[var-annotated]
    source.commit(example_files(), "initial")
    sink.up = False
    agent = make(source, tmp_path, clock, providers, sink=sink)
    agent.run()
    status, reason, message = condition(agent, "StatusPublished")
    assert (status, reason) == (False, "GitUnreachable") and "tried again in" in message
    assert values(providers["example.com"])  # DNS was reconciled meanwhile
    # the status branch no longer says what this cluster does: not Ready until a push succeeds
    ready, reason, message = condition(agent, "Ready")
    assert (ready, reason) == (False, "GitUnreachable") and "Ready again once a push succeeds" in message
    report = agent.last_report
    assert report is not None and report.zones_only  # its policies are judged by their zones: published
    attempts = sink.attempts
    agent.run()  # idle, and the push waits its backoff
    assert sink.attempts == attempts
    assert not condition(agent, "Ready")[0]  # still: no push succeeded
    sink.up = True
    clock.advance(1.0)
    agent.run()  # idle: nothing new, but the push is due again
    assert sink.attempts == attempts + 1 and sink.pushed
    assert condition(agent, "StatusPublished")[0]
    assert condition(agent, "Ready")[:2] == (True, "ReconcileSucceeded")
    assert agent.state.push_wait.failures == 0 and agent.state.push_failures == 1


def test_a_webhook_push_to_the_desired_branch_is_fetched_without_listing_it_first(tmp_path: Path) -> None:
    source, clock, providers = SigningSource(), Clock(), {}  # type: ignore[var-annotated]
    source.commit(example_files(), "initial")
    agent = make(source, tmp_path, clock, providers, validate_delay=600.0, quiet_period=3600.0)
    agent.run()
    files = example_files()
    files["clusters/eu-west-1.yaml"] = files["clusters/eu-west-1.yaml"].replace("192.0.2.", "203.0.113.")
    pushed = source.commit(files, "a merge")
    source.calls.clear()
    agent.git_kicked(desired_branch=True)
    agent.run("poll")
    assert source.calls == ["fetch"]  # one git operation: the fetch the delivery announced
    assert agent.state.applied_sha == pushed
    source.calls.clear()
    agent.git_kicked(desired_branch=True)  # a delivery with nothing new behind it: no pass
    cycle = agent.run("poll")
    assert source.calls == ["fetch"] and not cycle.outcomes
    source.calls.clear()
    agent.git_kicked(desired_branch=False)  # another branch (a status push): the usual listing
    agent.run("poll")
    assert source.calls == ["remote_head"]
