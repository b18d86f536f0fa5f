"""A cluster whose last listener in a zone goes leaves nothing there (`gitdns.core.plan.leave`).

Four clusters share a simple host.  What one of them holds in a zone is read from the zone
(its ownership TXT, its heartbeat), not only from git: the agent reads the zones it does not
publish in once after a start, and a zone that still holds something of its own is reconciled
as left — its values and TXT go, then its heartbeat, then the agent stops looking at it.  The
`local` store's views follow every write (``prune-owner`` among them).

The agent runs in process here (in-memory git source, the memory provider, a fake clock);
tests/e2e/test_leave_zone.py plays the same through the real CLI on the `local` store and BIND.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from gitdns.adapters.zonefile import Serving, serving_file, write_views
from gitdns.agent.config import AgentConfig
from gitdns.agent.cycle import Agent
from gitdns.agent.ports import AgentPorts
from gitdns.core.model import Zone
from gitdns.core.owner.zone import heartbeat_record
from gitdns.core.plan.leave import farewell, heartbeat_removal, holdings, holds
from gitdns.core.plan.planner import plan as make_plan
from gitdns.core.plan.values import Intent, PlanPolicy
from gitdns.core.records import Action, Change, RecordSet, ZoneSnapshot
from gitdns.core.registry import OwnerLabels, ownership_record
from gitdns.core.zonecorefile import ViewClients
from gitdns.errors import ConfigError, UnreachableError
from gitdns.providers.base import Provider
from gitdns.providers.local import LocalProvider
from gitdns.providers.memory import MemoryProvider
from tests.agent.fakes import Clock, FakeSource

ZONE = "example.test"
HOST = f"www.{ZONE}"
IDS = {f"c{i}": f"cluster-{i}-uid" for i in range(1, 5)}
IPS = {f"c{i}": f"192.0.2.{i}" for i in range(1, 5)}


# --- what an owner holds, and its last change ----------------------------------------------------

def shared_zone(owners: list[str], beats: list[str] = ()) -> ZoneSnapshot:  # type: ignore[assignment]
    data = RecordSet(HOST, "A", 60, tuple(sorted(IPS[o] for o in owners)))
    records = [data]
    for owner in owners:
        txt, _ = ownership_record(data, OwnerLabels(owner=IDS[owner], targets=(IPS[owner],)), ZONE)
        records.append(txt)
    records += [heartbeat_record(IDS[o], ZONE, 1_700_000_000) for o in beats]
    return ZoneSnapshot(ZONE, tuple(records))


def test_holdings_are_an_owners_claims_and_heartbeat() -> None:
    zone = shared_zone(["c1", "c2"], beats=["c2", "c3"])
    assert holdings(zone, IDS["c1"]).claims == (RecordSet(HOST, "A", 60, ()).key,)
    assert holdings(zone, IDS["c1"]).heartbeat is None and holds(zone, IDS["c1"])
    assert holdings(zone, IDS["c3"]).claims == () and holds(zone, IDS["c3"])  # a heartbeat alone
    assert not holds(zone, IDS["c4"])


def test_a_joint_legacy_txt_is_no_holding() -> None:
    """dns-operator's legacy TXT naming several owners is never removed by any of them: it
    must not keep a leaver planning the zone for ever."""
    data = RecordSet(HOST, "A", 60, ("192.0.2.1", "192.0.2.2"))
    joint = RecordSet(f"kuadrant-a-{HOST}", "TXT", 60,
                      (f"heritage=external-dns,external-dns/owner={IDS['c1']}&&{IDS['c2']}",))
    zone = ZoneSnapshot(ZONE, (data, joint))
    assert not holds(zone, IDS["c1"]) and not holds(zone, IDS["c2"])


def test_farewell_waits_for_the_owners_claims_to_go() -> None:
    assert farewell(shared_zone(["c1", "c2"], beats=["c2"]), IDS["c2"], ZONE) == []
    [last] = farewell(shared_zone(["c1"], beats=["c1", "c2"]), IDS["c2"], ZONE)
    assert last.action is Action.DELETE and last.old == heartbeat_record(IDS["c2"], ZONE, 1_700_000_000)
    assert farewell(shared_zone(["c1"]), IDS["c2"], ZONE) == []  # nothing left at all
    # prune-owner takes the heartbeat with the records, in one plan
    assert [c.old for c in heartbeat_removal(shared_zone(["c2"], beats=["c2"]), IDS["c2"], ZONE, "prune-owner")] \
        == [heartbeat_record(IDS["c2"], ZONE, 1_700_000_000)]


def test_a_leavers_plan_takes_exactly_its_value_and_txt() -> None:
    zone = shared_zone(["c1", "c2", "c3", "c4"])
    plan = make_plan(Intent(IDS["c2"], ()), zone, PlanPolicy(zone=ZONE, known_owners=tuple(IDS.values())))
    assert not plan.stalled and not plan.conflicts
    from gitdns.core.store import apply_changes

    after = ZoneSnapshot(ZONE, tuple(apply_changes(zone.by_key(), plan.changes, plan.guards).records.values()))
    assert after.by_key()[RecordSet(HOST, "A", 60, ()).key].values == ("192.0.2.1", "192.0.2.3", "192.0.2.4")
    assert not holds(after, IDS["c2"]) and all(holds(after, IDS[c]) for c in ("c1", "c3", "c4"))


# --- the local store's views follow every write ----------------------------------------------------

def a_write(name: str, *values: str) -> Change:
    rec = RecordSet(f"{name}.{ZONE}", "A", 60, values)
    return Change(Action.CREATE, None, rec, rec.key)


def test_views_follow_a_write_made_outside_a_reconcile(tmp_path: Path) -> None:
    store = LocalProvider(tmp_path / "zones")
    store.apply(ZONE, [a_write("one", "192.0.2.1")])
    serving = Serving(clients=(ViewClients("GEO-EU", ("127.0.0.2/32",)),), snippet=True, registry=False,
                      content_serial=True)
    first = write_views(store.views_dir(ZONE), ZONE, store.read, serving=serving)
    store.apply(ZONE, [a_write("two", "192.0.2.2")])  # prune-owner, adopt, a heartbeat: no render step
    views = store.views_dir(ZONE)
    text = (views / "default.zone").read_text()
    assert "two 60 IN A 192.0.2.2" in text and text != first["default"]
    assert (views / "GEO-EU.zone").read_text() == text.replace("view default", "view GEO-EU")
    # rendered as before: the same settings, so the same files as a render with them now
    again = write_views(tmp_path / "check", ZONE, store.read, serving=serving)
    assert again["default"] == text
    assert json.loads(serving_file(views).read_text())["serving"]["clients"] == [["GEO-EU", ["127.0.0.2/32"]]]


def test_a_render_of_the_version_already_rendered_writes_nothing(tmp_path: Path) -> None:
    """The write re-rendered the views: the pipeline's render right after reads them back.  A
    missing file or other settings render again."""
    store = LocalProvider(tmp_path / "zones")
    store.apply(ZONE, [a_write("one", "192.0.2.1")])
    views = store.views_dir(ZONE)
    first = write_views(views, ZONE, store.read)
    store.apply(ZONE, [a_write("two", "192.0.2.2")])
    inodes = {p.name: p.stat().st_ino for p in views.iterdir()}
    again = write_views(views, ZONE, store.read)
    assert again != first and again["default"] == (views / "default.zone").read_text()
    assert {p.name: p.stat().st_ino for p in views.iterdir()} == inodes
    (views / "default.weights").unlink()
    assert write_views(views, ZONE, store.read) == again and (views / "default.weights").is_file()
    other = write_views(views, ZONE, store.read, serving=Serving(content_serial=True))
    assert other["default"] != again["default"]  # the serial now comes from the content


def test_a_zone_never_rendered_is_not_rendered_by_a_write(tmp_path: Path) -> None:
    store = LocalProvider(tmp_path / "zones")
    assert store.apply(ZONE, [a_write("one", "192.0.2.1")]).ok
    assert not store.views_dir(ZONE).exists() and not serving_file(store.views_dir(ZONE)).exists()


def test_unreadable_view_settings_never_fail_the_write(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = LocalProvider(tmp_path / "zones")
    store.apply(ZONE, [a_write("one", "192.0.2.1")])
    write_views(store.views_dir(ZONE), ZONE, store.read)
    serving_file(store.views_dir(ZONE)).write_text("{not json")
    assert store.apply(ZONE, [a_write("two", "192.0.2.2")]).ok
    assert "two" not in (store.views_dir(ZONE) / "default.zone").read_text()  # the next reconcile renders
    assert "unreadable" in caplog.text


# --- the agent -----------------------------------------------------------------------------------

ZONE_DOC = ("apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata: {name: example-test}\n"
            f"spec:\n  domain: {ZONE}\n  provider: {{type: local, settings: {{path: zones}}}}\n")
OTHER_DOC = ZONE_DOC.replace("example-test", "other-test").replace(ZONE, "other.test")
POLICY_DOC = ("apiVersion: gitdns.io/v1alpha1\nkind: DNSPolicy\nmetadata: {name: web}\n"
              "spec:\n  targetRef: {gateway: gw, namespace: ingress}\n  strategy: simple\n")


def cluster_doc(name: str, hosts: list[str]) -> str:
    listeners = "".join(f"\n        - hostname: {h}" for h in hosts) if hosts else " []"
    return (f"apiVersion: gitdns.io/v1alpha1\nkind: Cluster\nmetadata: {{name: {name}}}\n"
            f"spec:\n  id: {IDS[name]}\n  gateways:\n    - name: gw\n      namespace: ingress\n"
            f"      addresses: [{IPS[name]}]\n      listeners:{listeners}\n")


def files(leavers: dict[str, list[str]] | None = None) -> dict[str, str]:
    out = {"zone.yaml": ZONE_DOC, "other.yaml": OTHER_DOC, "policy.yaml": POLICY_DOC}
    for name in IDS:
        hosts = (leavers or {}).get(name, [HOST])
        out[f"{name}.yaml"] = cluster_doc(name, hosts)
    return out


class Reads(MemoryProvider):
    """The memory provider, its whole-zone reads counted; ``down`` makes every read fail."""

    def __init__(self) -> None:
        super().__init__()
        self.whole_reads = 0
        self.down = False

    def read(self, zone, names=None):  # type: ignore[no-untyped-def,override]
        if self.down:
            raise UnreachableError("provider unreachable")
        if names is None:
            self.whole_reads += 1
        return super().read(zone, names)


class World:
    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.source = FakeSource()
        self.source.commit(files(), "four clusters share www")
        self.providers: dict[str, Reads] = {}
        self.clock = Clock()
        self.starts = 0
        self.refused: dict[str, int] = {}  # zones no provider can be built for here -> attempts

    def factory(self, zone: Zone) -> Provider:
        if zone.domain in self.refused:
            self.refused[zone.domain] += 1
            raise ConfigError(f"no credentials for {zone.domain} on this cluster")
        return self.providers.setdefault(zone.domain, Reads())

    def agent(self, name: str, **config: object) -> Agent:
        """An agent that starts from an empty state directory."""
        self.starts += 1
        cfg = AgentConfig(repo="mem://", cluster=name, state_dir=str(self.tmp / f"{name}-{self.starts}"),
                          **config)  # type: ignore[arg-type]
        return Agent(cfg, AgentPorts(source=self.source, factory=self.factory, clock=self.clock,
                                     rng=random.Random(1)))

    def zone(self) -> ZoneSnapshot:
        return self.providers[ZONE].read(ZONE)

    def expect(self, staying: list[str]) -> None:
        zone = self.zone()
        data = {(r.name, r.type): r.values for r in zone.records
                if not r.name.startswith(("kuadrant-", "gitdns-"))}
        assert data == ({(HOST, "A"): tuple(sorted(IPS[c] for c in staying))} if staying else {})
        for name, ident in IDS.items():
            assert holds(zone, ident) == (name in staying), (name, zone.records)


@pytest.fixture
def world(tmp_path: Path) -> World:
    w = World(tmp_path)
    for name in IDS:
        w.agent(name).run()
    w.expect(list(IDS))
    return w


def test_a_fresh_agent_removes_what_it_left_in_a_zone_and_then_stops(world: World) -> None:
    """c2 drops its listener (it keeps a host in other.test); its agent starts with an empty
    state directory, so nothing remembers that it was in example.test but the zone itself."""
    world.source.commit(files({"c2": ["app.other.test"]}), "c2 leaves example.test")
    agent = world.agent("c2")
    cycle = agent.run()
    assert sorted(o.zone.domain for o in cycle.outcomes) == [ZONE, "other.test"]
    world.expect(["c1", "c3", "c4"])
    assert list(agent.state.tracks) == ["other-test"]  # example.test is no longer reconciled
    report = agent.last_report
    assert report is not None and report.ready and [z.zone for z in report.zones] == ["other.test"]
    reads = world.providers[ZONE].whole_reads
    world.clock.advance(3600)
    agent.validate()
    agent.run(force=True)
    assert world.providers[ZONE].whole_reads == reads  # never looked at again


def test_a_running_agent_that_leaves_stops_after_the_cleanup(world: World) -> None:
    agent = world.agent("c3")
    agent.run()
    world.source.commit(files({"c3": []}), "c3 leaves")
    agent.run()
    world.expect(["c1", "c2", "c4"])
    assert agent.state.tracks == {}
    world.clock.advance(3600)
    assert agent.validate() == 0 and not agent.validation_due()


def test_the_other_agents_do_not_touch_a_leavers_records(world: World) -> None:
    """Only the owner removes its own: c1 at the new revision, fresh, leaves c2's value alone
    until c2's agent runs."""
    world.source.commit(files({"c2": []}), "c2 leaves")
    world.agent("c1").run()
    world.expect(["c1", "c2", "c3", "c4"])
    world.agent("c2").run()
    world.expect(["c1", "c3", "c4"])


def test_a_zone_unreadable_at_the_start_is_looked_at_again(world: World) -> None:
    world.source.commit(files({"c4": []}), "c4 leaves")
    world.providers[ZONE].down = True
    agent = world.agent("c4")
    agent.run()
    world.providers[ZONE].down = False
    world.expect(["c1", "c2", "c3", "c4"])
    agent.run(force=True)
    world.expect(["c1", "c2", "c3"])


def test_a_zone_without_a_provider_here_is_skipped_once_and_breaks_nothing(world: World) -> None:
    world.source.commit(files({"c1": []}), "c1 leaves")
    world.refused["other.test"] = 0
    agent = world.agent("c1")
    cycle = agent.run()
    assert [o.errors for o in cycle.outcomes] == [[]] and agent.last_report is not None and agent.last_report.ready
    world.expect(["c2", "c3", "c4"])
    agent.run(force=True)
    assert world.refused["other.test"] == 1  # not tried again


def test_a_remote_reads_no_zone_for_leftovers(world: World) -> None:
    world.source.commit(files({"c1": []}), "c1 leaves")
    before = world.providers[ZONE].whole_reads
    world.agent("c1", mode="remote").run()
    assert world.providers[ZONE].whole_reads == before
    world.expect(["c1", "c2", "c3", "c4"])  # a remote's old claims are its primaries' to clean


# --- the one-shot verbs: plan --cluster previews the leave, apply does it ----------------------------

def test_plan_previews_and_apply_removes_what_a_cluster_left(tmp_path: Path) -> None:
    from gitdns.commands.apply import apply
    from gitdns.commands.owners import prune_owner
    from gitdns.commands.plan.command import plan

    repo = tmp_path / "repo"
    repo.mkdir()
    for rel, text in files().items():
        (repo / rel).write_text(text)
    for name in IDS:
        assert apply(repo, cluster=name).code == 0
    store = LocalProvider(repo / "zones")
    for rel, text in files({"c2": ["app.other.test"]}).items():
        (repo / rel).write_text(text)  # no git: nothing tells which revision c2 applied
    before = store.read(ZONE)
    preview = plan(repo, cluster="c2", fmt="json")
    assert preview.code == 0, preview.err
    plans = {p["zone"]: p for p in json.loads("".join(preview.out))["plans"]}
    assert {c["action"] for c in plans[ZONE]["changes"]} == {"update", "delete"}
    assert store.read(ZONE) == before  # a preview writes nothing
    assert apply(repo, cluster="c2").code == 0
    zone = store.read(ZONE)
    assert not holds(zone, IDS["c2"]) and all(holds(zone, IDS[c]) for c in ("c1", "c3", "c4"))
    assert "192.0.2.2" not in (store.views_dir(ZONE) / "default.zone").read_text()
    # c4 leaves git; prune-owner takes its records, and the views follow at once
    (repo / "c4.yaml").unlink()
    assert prune_owner(repo, IDS["c4"], ZONE).code == 0
    served = (store.views_dir(ZONE) / "default.zone").read_text()
    assert "192.0.2.4" not in served and IDS["c4"] not in served
    assert served == write_views(tmp_path / "fresh", ZONE, store.read)["default"]


def test_apply_says_which_zone_it_could_not_read_and_goes_on(tmp_path: Path) -> None:
    """A zone of git this machine has no provider for (here an rfc2136 server the operator's
    fences do not allow) is not fatal to a cluster that does not publish there: said, skipped."""
    from gitdns.commands.apply import apply

    repo = tmp_path / "repo"
    repo.mkdir()
    for rel, text in files().items():
        (repo / rel).write_text(text)
    (repo / "third.yaml").write_text(ZONE_DOC.replace("example-test", "third-test").replace(ZONE, "third.test")
                                     .replace("{type: local, settings: {path: zones}}",
                                              "{type: rfc2136, settings: {server: 127.0.0.1}}"))
    result = apply(repo, cluster="c1")
    assert result.code == 0, (result.out, result.err)
    lines = "\n".join(result.out).splitlines()
    assert any(line.startswith("[c1] zone third.test: skipped: not read for records c1 left there: ")
               for line in lines), lines
    assert holds(LocalProvider(repo / "zones").read(ZONE), IDS["c1"])
