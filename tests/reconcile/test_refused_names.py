"""After a stale refusal a pass that read by name re-reads the refused groups' names only
(`engine.refused_names`): their data names and the ownership TXT names it read for them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gitdns.core.records import RecordKey
from gitdns.core.registry import txt_name
from gitdns.reconcile.engine import refused_names

ZONE = "example.com"
LABELS = st.sampled_from(["api", "www", "klb.api", "geo-eu.klb.api", "*.apps", "x1.klb.api"])
TYPES = st.sampled_from(["A", "AAAA", "CNAME", "TXT", "MX"])
OWNERS = st.sampled_from(["c0", "c1", "c2", "3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63"])


def fqdn(label: str) -> str:
    return ZONE if label == "@" else f"{label}.{ZONE}"


@given(st.lists(st.tuples(LABELS | st.just("@"), TYPES), min_size=1, max_size=6),
       st.lists(st.tuples(OWNERS, TYPES, LABELS | st.just("@")), max_size=20), st.data())
def test_the_refused_groups_names_and_their_txt_only(keys: list[tuple[str, str]],
                                                     txts: list[tuple[str, str, str]], data: st.DataObject) -> None:
    groups = [RecordKey(fqdn(label), rtype) for label, rtype in keys]
    read = {fqdn(label) for label, _ in keys} | {txt_name(o, t, fqdn(label), ZONE) for o, t, label in txts}
    refused = data.draw(st.lists(st.sampled_from(groups), min_size=1, unique=True))
    again = refused_names(refused, read)
    assert again is not None
    wanted = {g.name for g in refused}
    assert wanted <= again
    for owner, rtype, label in txts:
        name = txt_name(owner, rtype, fqdn(label), ZONE)
        assert (name in again) == (fqdn(label) in wanted)  # a TXT comes back with its record's name only
    assert again <= read | wanted


def test_a_whole_zone_pass_re_reads_the_whole_zone() -> None:
    assert refused_names([RecordKey(f"api.{ZONE}", "A")], None) is None


def test_verify_is_left_to_the_validation_loop_once_the_stale_retries_ran_out() -> None:
    from gitdns.core.model import ProviderRef, Zone
    from gitdns.reconcile.engine import needs_verify
    from gitdns.reconcile.zonepass import ZoneOutcome

    zone = Zone(name="example-com", domain=ZONE, provider=ProviderRef(type="memory"))
    refused = ZoneOutcome(zone, refused_retries=1)
    assert needs_verify(refused)  # refused once, landed on a re-plan: look again
    out = ZoneOutcome(zone, refused_retries=1, stale_out=True, errors=["stale writes still refused"])
    assert not needs_verify(out)  # re-reading what just took too long: the validation loop's
    assert needs_verify(out, always=True)  # a one-shot run has no validation loop after it
    assert needs_verify(ZoneOutcome(zone, errors=["Unreachable: x"]))


def test_a_pass_after_a_failed_one_reads_its_intent_by_name(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """After a failure nothing of the intent is remembered; the next pass (not a validation)
    looks at every key of its intent by name where that is cheaper, not at the whole zone."""
    from gitdns.reconcile.pipeline import Role, run
    from gitdns.reconcile.zonepass import ZoneOutcome
    from tests.reconcile.test_readset import Recording, _desired, _pass, _published

    desired = _desired(tmp_path)
    store = Recording()
    passes = _published(tmp_path, store, desired)
    ident = next(iter(passes))
    memory = passes[ident].memory
    zone = desired.state.zone("example-com")
    assert zone is not None
    memory.zone_size = 10_000
    memory.intent = None
    memory.last = ZoneOutcome(zone, errors=["Throttled: rate exceeded"])
    store.reads.clear()
    again = _pass(desired, ident, store, memory)
    run(again, Role.DEFAULT)
    assert again.outcome.ok, again.outcome.errors
    assert again.names is not None and store.reads[1] == again.names  # after the active groups' two names
    memory.last = None  # an agent's first pass after a restart: the whole zone (it finds leftovers)
    store.reads.clear()
    first = _pass(desired, ident, store, memory)
    run(first, Role.DEFAULT)
    assert first.names is None and None in store.reads


def test_the_inactive_groups_pruning_leaves_a_record_an_active_cluster_is_about_to_claim(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Switched to site-b: a record the pruner would delete (no active claim seen yet) while an
    active cluster git names builds it is left for a later pass (its claim is about to come:
    deleting now would orphan it, and Route53 cannot make the delete wait for it); a record only
    inactive clusters build is pruned."""
    from gitdns.core.groups import Decision
    from gitdns.core.plan.values import Authority, Plan
    from gitdns.core.records import Action, Change, RecordSet
    from gitdns.reconcile.readset import key_owners
    from gitdns.reconcile.steps import joining
    from gitdns.reconcile.zonepass import ZoneOutcome, ZonePass
    from tests.reconcile.test_readset import _desired

    desired = _desired(tmp_path)
    zone = desired.state.zone("example-com")
    pruner = desired.state.cluster("eu-central-1")
    assert zone is not None and pruner is not None and pruner.group == "site-b"
    index = key_owners(desired.state, zone)
    assert index is not None
    ids = {c.name: c.id for c in desired.state.clusters}
    shared = next(k for k, who in index.by_key.items() if ids["us-east-1"] in who and ids["eu-west-1"] in who)
    only_a = next(k for k, who in index.by_key.items() if who == {ids["eu-west-1"]})

    def delete(key: RecordKey) -> Change:
        rec = RecordSet(key.name, key.type, 60, ("x.example.net.",) if key.type == "CNAME" else ("192.0.2.1",),
                        key.set_id)
        return Change(Action.DELETE, rec, None, key)

    plan = Plan(zone=ZONE, owner=pruner.id, authority=Authority.INACTIVE_GROUPS,
                changes=(delete(shared), delete(only_a)))
    p = ZonePass(zone, desired, pruner, None, True, ZoneOutcome(zone),  # type: ignore[arg-type]
                 groups=Decision(frozenset({"site-b"}), 2, False, ()))
    assert joining(p, plan) == {shared}  # us-east-1 (site-b, active) builds it: kept for its claim
