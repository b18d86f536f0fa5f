"""Malformed ownership TXT in a zone, and whether gitdns leaves them alone.

The zone is what the agent of example-repo's ``eu-west-1`` publishes in ``example.com`` and
``example.org`` (`baseline`), with TXT records put in (`seeded`), each drawn by `malformed`:

- **names**: this owner's own ownership TXT names, another owner's, Kuadrant's legacy form, and
  those cut short, in upper case, with an unknown record type, or a random label in the zone;
- **values**: a real ownership value (this owner's, another owner's, a joint legacy one) cut at
  any point, with another or no heritage, another or no version, a label twice (the second
  different), quotes and escapes, blanks, another owner's id (or this one's in another case, or
  joined with ``&&``), ``targets`` over 255 octets or over 64 KiB, bytes that are no UTF-8 (as
  U+FFFD, as a provider reads them, and as lone surrogates, as a ``\\udcff`` escape in the store
  file reads), controls and NUL; and random text; one to three values a record.

`may_change(record)`: only a TXT that decodes as this owner's own (not a joint one) may be
rewritten or deleted — and one whose group the zone's ActiveGroups leaves out, by the explicit
authority of an active group's owner.  Every other seeded record must stay byte for byte.
"""

from __future__ import annotations

import random
import traceback
from collections.abc import Callable
from functools import cache
from pathlib import Path

from hypothesis import strategies as st

from gitdns.adapters.repo import load_schemas
from gitdns.agent.config import AgentConfig
from gitdns.agent.cycle import Agent
from gitdns.agent.ports import AgentPorts
from gitdns.core import builder
from gitdns.core.model import DesiredState
from gitdns.core.names import short_hash
from gitdns.core.plan.planner import decode_zone, plan
from gitdns.core.plan.values import Authority, Intent, PlanPolicy
from gitdns.core.rdata import value_error
from gitdns.core.records import RecordKey, RecordSet, ZoneSnapshot, in_zone
from gitdns.core.registry import decode_entries, txt_name
from gitdns.core.validate import check
from gitdns.providers.memory import MemoryProvider
from tests.agent.fakes import Clock, FakeSource, example_files

CLUSTER = "eu-west-1"
OWNER = "3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63"
EU_CENTRAL, US_EAST = "8a1e47d2-0c3b-4f95-a6d8-71b2c9e05f34", "c5d09a7f-2e64-4b18-8f3c-96a0e1d4b275"
OTHERS = (EU_CENTRAL, US_EAST, "kuadrant-owner",
          OWNER.upper(), OWNER + " ", f"{OWNER}&&kuadrant-owner", "")
ACTIVE_GROUPS = frozenset({"site-a", "site-b"})
ZONES = ("example.com", "example.org")


@cache
def baseline() -> dict[str, tuple[RecordSet, ...]]:
    """Each zone as the agent leaves it after applying example-repo (memory provider)."""
    source = FakeSource()
    source.commit(example_files(), "the example")
    providers: dict[str, MemoryProvider] = {}
    import tempfile

    with tempfile.TemporaryDirectory() as state:
        agent = Agent(AgentConfig(repo="mem://", cluster=CLUSTER, state_dir=state),
                      AgentPorts(source=source, factory=lambda z: providers.setdefault(z.domain, MemoryProvider()),
                                 clock=Clock(), rng=random.Random(1)))
        agent.run()
    return {domain: providers[domain].read(domain).records for domain in ZONES}


def _ownership(domain: str) -> list[RecordSet]:
    return [r for r in baseline()[domain] if decode_entries(r)]


def _data(domain: str) -> list[RecordSet]:
    return [r for r in baseline()[domain] if not decode_entries(r) and not r.name.startswith(("gitdns-", "kuadrant-"))]


def _names(domain: str) -> list[str]:
    own = [r.name for r in _ownership(domain)]
    data = _data(domain)
    others = [txt_name(o, r.type, r.name, domain) for o in OTHERS[:3] for r in data]
    legacy = [f"kuadrant-{r.type.lower()}-{r.name}" for r in data]
    broken = [n for name in own[:4] for n in (name[: len("kuadrant-runyqco3-")], name[:9], name.upper(),
                                               name.replace("-a-", "-ptr-", 1), "kuadrant-" + name)]
    return sorted(set(own + others + legacy + broken + [f"kuadrant-{short_hash(OWNER, 8)}-a.{domain}"]))


def _values(domain: str) -> list[str]:
    real = [v for r in _ownership(domain) for v in r.values]
    made = [f"heritage=external-dns,external-dns/owner={o},external-dns/version=1" for o in OTHERS]
    made += ["heritage=external-dns,external-dns/owner=kuadrant-a&&kuadrant-b",
             f"heritage=external-dns,external-dns/owner={OWNER}",
             f"heritage=external-dns,external-dns/group=site-z,external-dns/owner={OTHERS[0]},external-dns/version=1"]
    return real + made


LABEL_EDITS = ("cut", "heritage", "version", "twice", "quote", "blank", "owner", "targets", "bytes", "control")
HERITAGES = ("heritage=external-dnsx", "Heritage=external-dns", "heritage=kuadrant", "heritage=", "",
             '"heritage=external-dns"', "heritage = external-dns")
VERSIONS = ("external-dns/version=2", "external-dns/version=", "external-dns/version=1.0", "external-dns/version")


@st.composite
def value(draw: st.DrawFn, domain: str) -> str:
    if draw(st.integers(0, 5)) == 0:
        return draw(st.text(max_size=40))
    text = draw(st.sampled_from(_values(domain)))
    for edit in draw(st.lists(st.sampled_from(LABEL_EDITS), min_size=1, max_size=2)):
        pos = draw(st.integers(0, len(text)))
        if edit == "cut":
            text = text[:pos]
        elif edit == "heritage":
            text = text.replace("heritage=external-dns", draw(st.sampled_from(HERITAGES)), 1)
        elif edit == "version":
            text = text.replace("external-dns/version=1", draw(st.sampled_from(VERSIONS)), 1)
        elif edit == "twice":
            label = draw(st.sampled_from(["owner", "version", "targets", "group", "rev"]))
            text += f",external-dns/{label}={draw(st.sampled_from([OWNER, *OTHERS, '1', '2', '192.0.2.66']))}"
        elif edit == "quote":
            text = text[:pos] + draw(st.sampled_from(['"', '\\"', "\\", "\\,", "\\;", "'", '""', "\\032"])) + text[pos:]
        elif edit == "blank":
            text = draw(st.sampled_from([" ", "\t", "\n", "  "])) + text + draw(st.sampled_from(["", " ", "\n"]))
        elif edit == "owner":
            text = text.replace(f"owner={OWNER}", f"owner={draw(st.sampled_from(OTHERS))}", 1)
        elif edit == "targets":
            size = draw(st.sampled_from([256, 300, 4096, 65_537, 70_000]))
            text += ",external-dns/targets=" + ";".join(["192.0.2.1"] * (size // 10 + 1))
        elif edit == "bytes":
            text = text[:pos] + draw(st.sampled_from(["\ufffd", "\udcff", "\udc80\udcfe", "\ufffd\ufffd"])) + text[pos:]
        else:
            text = text[:pos] + draw(st.sampled_from(["\x00", "\x1b[2J", "\u202e", "\x7f", "\u2028"])) + text[pos:]
    return text


@st.composite
def malformed(draw: st.DrawFn, domain: str) -> RecordSet:
    names = _names(domain)
    name = draw(st.one_of(st.sampled_from(names),
                          st.from_regex(r"[a-z0-9-]{1,20}", fullmatch=True).map(lambda label: f"{label}.{domain}")))
    set_ids = sorted({r.set_id for r in baseline()[domain]})
    set_id = draw(st.one_of(st.just(""), st.sampled_from(set_ids)))
    values = tuple(draw(st.lists(value(domain), min_size=1, max_size=3)))
    return RecordSet(name, "TXT", draw(st.sampled_from([60, 300, 0])), values, set_id=set_id)


def seeded(domain: str, seeds: list[RecordSet], fresh: bool = False) -> tuple[dict[RecordKey, RecordSet],
                                                                             list[RecordSet]]:
    """The zone with the seeds in (a seed on a data record of the baseline is left out: that
    record is this owner's data, not a TXT it may find) and the seeds that went in; ``fresh``:
    the zone before this owner published anything (the seeds alone)."""
    records = {} if fresh else {r.key: r for r in baseline()[domain]}
    used: dict[RecordKey, RecordSet] = {}
    for seed in seeds:
        held = records.get(seed.key)
        if held is not None and seed.key not in used and not decode_entries(held):
            continue
        records[seed.key] = used[seed.key] = seed  # a later seed of the same key replaces the earlier
    return records, list(used.values())


def may_change(record: RecordSet, inactive_groups: bool) -> bool:
    """Whether this owner may rewrite or delete ``record`` (with ``inactive_groups``: also as an
    active group's owner removing what the zone's inactive groups own).  A TXT outside both
    zones (a seed's name the zone cannot hold) is nobody's."""
    if not any(in_zone(record.name, zone) for zone in ZONES):
        return False
    for entry in decode_entries(record):
        if entry.joint:
            continue
        if entry.owner == OWNER:
            return True
        if inactive_groups and entry.labels.group and entry.labels.group not in ACTIVE_GROUPS:
            return True
    return False


def agent_cycles(store: str, root: Path, zones: dict[str, dict[RecordKey, RecordSet]],
                 cycles: int = 2) -> tuple[Agent, Callable[[str], dict[RecordKey, RecordSet]]]:
    """The agent of ``eu-west-1`` on ``zones`` (`local` record stores under ``root``, or
    `memory` ones), run ``cycles`` times; and how to read a zone after."""
    from gitdns.providers.local import LocalProvider, decode_store, encode_store

    directory = root / "store"
    memory = {domain: MemoryProvider({domain: records.values()}) for domain, records in zones.items()}
    if store == "local":
        directory.mkdir(parents=True, exist_ok=True)
        for domain, records in zones.items():
            (directory / f"{domain}.json").write_bytes(encode_store(domain, 1, records))
    source = FakeSource()
    source.commit(example_files(), "the example")
    factory = (lambda zone: LocalProvider(directory)) if store == "local" else (lambda zone: memory[zone.domain])
    agent = Agent(AgentConfig(repo="mem://", cluster=CLUSTER, state_dir=str(root / "state")),
                  AgentPorts(source=source, factory=factory, clock=Clock(), rng=random.Random(1)))
    for _ in range(cycles):
        agent.run()

    def read(domain: str) -> dict[RecordKey, RecordSet]:
        if store == "local":
            path = directory / f"{domain}.json"
            return decode_store(path, path.read_bytes(), domain)[1]
        return {r.key: r for r in memory[domain].read(domain).records}

    return agent, read


# --- judging ------------------------------------------------------------------------------------


def _intent_and_policies(domain: str) -> tuple[Intent, list[PlanPolicy]]:
    state = _state()
    cluster = state.cluster(CLUSTER)
    zone = state.zone_for_host(domain)
    assert cluster is not None and zone is not None
    records = builder.desired_for_zone(state, cluster, zone)
    owners = tuple(c.id for c in state.clusters)
    own = PlanPolicy(zone=domain, known_owners=owners)
    prune = PlanPolicy(zone=domain, known_owners=owners, authority=Authority.INACTIVE_GROUPS,
                       active_groups=ACTIVE_GROUPS)
    return Intent(OWNER, records, state.revision, cluster.group), [own, prune]


@cache
def _state() -> DesiredState:
    return check(example_files(), load_schemas()).state


def read_and_plan(domain: str, records: dict[RecordKey, RecordSet], seeds: list[RecordSet]) -> list[str]:
    """The registry reader and the planner on the zone: no exception, and no change to a seed
    this owner may not change (under its own authority and an active group's)."""
    failures = []
    by_key = {s.key: s for s in seeds}
    try:
        for seed in seeds:
            decode_entries(seed)
        decode_zone(ZoneSnapshot(domain, tuple(records.values())))
        intent, policies = _intent_and_policies(domain)
        for policy in policies:
            for change in plan(intent, ZoneSnapshot(domain, tuple(records.values())), policy).changes:
                seed = by_key.get(change.key)
                inactive = policy.authority is Authority.INACTIVE_GROUPS
                if seed is not None and not may_change(seed, inactive):
                    failures.append(f"{domain}: a TXT not this owner's was changed by the plan "
                                    f"({policy.authority.value}): {change.action.value} of {seed!r:.300}")
    except Exception:  # the fuzzer counts it
        failures.append(f"crash in the registry reader or the planner:\n{traceback.format_exc()}")
    return failures


def _row(record: RecordSet, domain: str) -> bytes:
    from gitdns.providers.local import encode_store

    return encode_store(domain, 0, {record.key: record}).split(b"\n")[1]


def judge_txt(seeds: dict[str, list[RecordSet]], root: Path, store: str | None = "memory",
              fresh: bool = False) -> tuple[list[str], int]:
    """Failures (crashes, zone errors, seeds changed that were not this owner's, an address
    written that is none), and how many seeds went in; with ``store`` None, the registry reader
    and the planner only; ``fresh``: into zones this owner has not published in yet."""
    from tests.fuzz.harness import logged_tracebacks

    failures: list[str] = []
    zones, used = {}, {}
    for domain in ZONES:
        zones[domain], used[domain] = seeded(domain, seeds.get(domain, []), fresh)
        failures += read_and_plan(domain, zones[domain], used[domain])
    count = sum(map(len, used.values()))
    if store is None:
        return failures, count
    with logged_tracebacks() as errors:
        try:
            agent, read = agent_cycles(store, root, zones)
        except Exception:  # the fuzzer counts it
            return [*failures, f"crash in Agent.run:\n{traceback.format_exc()}"], count
    failures += errors.tracebacks
    report = agent.last_report
    failures += [f"zone {z.zone}: {z.error}" for z in (report.zones if report else ()) if z.error]
    for domain in ZONES:
        after = read(domain)
        failures += [f"{domain}: {rec.key} written with {v!r}: {why}" for rec in after.values()
                     if rec.type in ("A", "AAAA") and rec != zones[domain].get(rec.key)
                     for v in rec.values if (why := value_error(rec.type, v))]
        data = (root / "store" / f"{domain}.json").read_bytes() if store == "local" else b""
        for seed in used[domain]:
            if may_change(seed, True):
                continue
            if after.get(seed.key) != seed or (store == "local" and _row(seed, domain) not in data):
                failures.append(f"{domain}: a TXT not this owner's was changed: {seed!r:.300} -> "
                                f"{after.get(seed.key)!r:.300}")
    return failures, count
