"""The examples of issue 28 item 4 ("DNS names are checked as DNS"), end to end: each validated,
was applied, and wrote into a zone.  Now each is a problem at its file and line, and `gitdns
apply` and an agent cycle (which run the same validation) hold the zone: nothing is written.

The examples: a RecordSet CNAME at a name a DNSPolicy publishes (the simple host app.example.org,
and klb.api.example.com of the loadbalanced api.example.com); Zones at a public suffix and at
cluster.local; the apex NS in a RecordSet; a CNAME loop across RecordSets; a Cluster whose id
differs from another's only in case; a non-finite number (``.nan`` passed a 0..1 schema range).
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from gitdns.agent.config import AgentConfig
from gitdns.agent.cycle import Agent
from gitdns.agent.ports import AgentPorts
from gitdns.cli import main
from gitdns.commands import EXIT_ERROR, EXIT_OK
from gitdns.core.model import Zone
from gitdns.providers.base import Provider
from gitdns.providers.memory import MemoryProvider
from tests.agent.fakes import Clock, FakeSource, example_files

ROOT = Path(__file__).resolve().parent.parent
HEAD = "apiVersion: gitdns.io/v1alpha1\n"
EU_WEST = "3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63"
STORE = "{type: local, settings: {path: .gitdns/zones}}"


def _records(zone: str, rows: str) -> str:
    return f"{HEAD}kind: RecordSet\nmetadata: {{name: extra-{zone}}}\nspec:\n  zone: {zone}\n  records:\n{rows}"


def _zone_with_a_record(name: str, domain: str) -> str:
    return (f"{HEAD}kind: Zone\nmetadata: {{name: {name}}}\nspec:\n  domain: {domain}  # <-\n  provider: {STORE}\n"
            "---\n" + _records(name, "    - {name: www, type: A, values: [192.0.2.80]}\n"))


def _nan(files: dict[str, str]) -> dict[str, str]:
    zone = files["zones/example-org.yaml"] + "  safety:\n    maxChangeFraction: .nan  # <-\n"
    return {"zones/example-org.yaml": zone,
            "extra.yaml": _records("example-org", "    - {name: new, type: A, values: [192.0.2.81]}\n")}


def _nan_interval(files: dict[str, str]) -> dict[str, str]:
    policy = files["policies/web.yaml"] + "  healthCheck:\n    interval: .nan  # <-\n"
    return {"policies/web.yaml": policy,
            "extra.yaml": _records("example-org", "    - {name: new, type: A, values: [192.0.2.81]}\n")}


# id -> (the files it adds or replaces, the zones (domains) it holds)
EXAMPLES: dict[str, tuple[Callable[[dict[str, str]], dict[str, str]], tuple[str, ...]]] = {
    "cname-at-a-simple-host": (lambda f: {"extra.yaml": _records(
        "example-org", "    - name: app  # <-\n      type: CNAME\n      values: [app.attacker.example.net.]\n")},
        ("example.org",)),
    "cname-at-a-klb-name": (lambda f: {"extra.yaml": _records(
        "example-com", "    - name: klb.api  # <-\n      type: CNAME\n      values: [app.attacker.example.net.]\n")},
        ("example.com",)),
    "public-suffix-zone": (lambda f: {"extra.yaml": _zone_with_a_record("couk", "co.uk")}, ("co.uk",)),
    "cluster-local-zone": (lambda f: {"extra.yaml": _zone_with_a_record("kube", "cluster.local")},
                           ("cluster.local",)),
    "apex-ns": (lambda f: {"extra.yaml": _records(
        "example-org", "    - name: '@'\n      type: NS  # <-\n      values: [ns1.attacker.example.net.]\n")},
        ("example.org",)),
    "cname-loop": (lambda f: {
        "extra.yaml": _records("example-org", "    - name: a\n      type: CNAME\n"
                                              "      values: [b.example.org.]  # <-\n"),
        "more.yaml": _records("example-com", "    - name: b.example.org\n      type: CNAME\n"
                                             "      values: [A.Example.Org]\n").replace("zone: example-com\n", "")},
        ("example.org",)),
    "cluster-ids-differ-only-in-case": (lambda f: {"zz.yaml": (
        f"{HEAD}kind: Cluster\nmetadata: {{name: twin}}\nspec:\n  id: {EU_WEST.upper()}  # <-\n  gateways:\n"
        "    - {name: web-gw, namespace: web, addresses: [192.0.2.82], listeners: [{hostname: app.example.org}]}\n")},
        ("example.com", "example.org")),
    "nan-fraction": (_nan, ("example.org",)),
    "nan-interval": (_nan_interval, ("example.org",)),
}
# metadata.name of the zones above
NAMES = {"example.org": "example-org", "example.com": "example-com", "co.uk": "couk", "cluster.local": "kube"}
def _edit(files: dict[str, str], case: str) -> tuple[dict[str, str], str]:
    """The files with the example in, and where its first problem is (``file:line``)."""
    changed = EXAMPLES[case][0](files)
    file, text = next((f, t) for f, t in sorted(changed.items()) if "# <-" in t)
    line = next(n for n, row in enumerate(text.splitlines(), 1) if "# <-" in row)
    return {**files, **changed}, f"{file}:{line}: "


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    dest = tmp_path / "repo"
    shutil.copytree(ROOT / "example-repo", dest, ignore=shutil.ignore_patterns(".gitdns"))
    return dest


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _stores(repo: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((repo / ".gitdns" / "zones").glob("*.json"))}


@pytest.mark.parametrize("case", sorted(EXAMPLES))
def test_validate_and_apply_refuse_it_and_hold_the_zone(repo: Path, capsys: pytest.CaptureFixture[str],
                                                        case: str) -> None:
    assert _run(capsys, "apply", "--repo", str(repo), "--all-clusters")[0] == EXIT_OK
    before = _stores(repo)
    files = {p.relative_to(repo).as_posix(): p.read_text() for p in repo.rglob("*.yaml") if ".gitdns" not in p.parts}
    edited, where = _edit(files, case)
    for rel, text in edited.items():
        (repo / rel).write_text(text)
    code, out, _ = _run(capsys, "validate", str(repo))
    held = EXAMPLES[case][1]
    assert code == EXIT_ERROR and where in out, out
    assert f"zones held: {', '.join(sorted(NAMES[d] for d in held))};" in out, out
    code, _, err = _run(capsys, "apply", "--repo", str(repo), "--all-clusters")
    assert where in err and "Traceback" not in err, err
    assert f"zones held: {', '.join(sorted(NAMES[d] for d in held))}" in err, err
    assert code == EXIT_ERROR, err  # a refused Zone document too: the zone has no outcome, but it is held
    after = _stores(repo)
    for domain in held:
        assert after.get(f"{domain}.json") == before.get(f"{domain}.json")


@pytest.mark.parametrize("case", sorted(EXAMPLES))
def test_an_agent_cycle_holds_the_zone_and_writes_nothing(tmp_path: Path, case: str) -> None:
    source = FakeSource()
    source.commit(example_files(), "good")
    providers: dict[str, MemoryProvider] = {}

    def factory(zone: Zone) -> Provider:
        return providers.setdefault(zone.domain, MemoryProvider())

    agent = Agent(AgentConfig(repo="mem://", cluster="eu-west-1", state_dir=str(tmp_path)),
                  AgentPorts(source=source, factory=factory, clock=Clock(), rng=random.Random(1)))
    agent.run()
    before = {domain: provider.read(domain).records for domain, provider in providers.items()}
    edited, where = _edit(example_files(), case)
    source.commit(edited, case)
    agent.run()
    report = agent.last_report
    assert report is not None and not report.ready
    held = {z.zone: z for z in report.zones if z.held}
    for domain in EXAMPLES[case][1]:
        assert domain in held, sorted(held)
        assert held[domain].problems, domain
        provider = providers.get(domain)
        assert (provider.read(domain).records if provider else ()) == before.get(domain, ())
    assert any(p.startswith(where) for z in held.values() for p in z.problems)


def test_a_child_zone_delegated_from_its_parent_in_git_is_applied_there(repo: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The form `ZoneInsideZone` asks for: NS records named after the child, in a RecordSet of
    the parent, land in the parent's zone; the child's own records in the child's."""
    (repo / "sub.yaml").write_text(
        f"{HEAD}kind: Zone\nmetadata: {{name: sub}}\nspec: {{domain: sub.example.org, provider: {STORE}}}\n---\n"
        + _records("example-org", "    - {name: sub, type: NS, values: [ns1.example.net., ns2.example.net.]}\n")
        + "---\n" + _records("sub", "    - {name: www, type: A, values: [192.0.2.44]}\n"))
    code, _, err = _run(capsys, "apply", "--repo", str(repo), "--all-clusters")
    assert code == EXIT_OK, err

    def names(domain: str) -> dict[tuple[str, str], list[str]]:
        doc = json.loads((repo / ".gitdns" / "zones" / f"{domain}.json").read_text())
        return {(r[0], r[1]): r[6] for r in doc["records"] if not r[0].startswith("kuadrant-")}

    assert names("example.org")[("sub.example.org", "NS")] == ["ns1.example.net", "ns2.example.net"]
    assert names("sub.example.org") == {("www.sub.example.org", "A"): ["192.0.2.44"]}
