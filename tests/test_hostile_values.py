"""The hostile values of the issue "Hostile input", each refused before anything is written.

A tenant named ``"evil\\n"``, ``A: not-an-ip``, a TXT value with a newline and a cluster id
ending in a newline validated, landed in the store and then crashed ``apply`` on dnspython's
``SyntaxError``; a TXT value ``x,external-dns/owner=<other id>`` poisoned the ownership labels,
so gitdns showed its own record as FOREIGN with a permanent ForeignRecordInTheWay.  Each is
now a validation problem naming the file, line and field (the zone is held, its store
untouched), or, for the poisoning, a value the registry never misreads.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from gitdns.adapters.repo import load_schemas
from gitdns.cli import main
from gitdns.commands import EXIT_ERROR, EXIT_OK
from gitdns.core import registry
from gitdns.core.checks.groups import GROUP_FORBIDDEN
from gitdns.core.names import TXT_PREFIX
from gitdns.core.owner.zone import HEARTBEAT_PREFIX, heartbeat_record
from gitdns.core.problems import Problem
from gitdns.core.records import RecordSet
from gitdns.core.registry import OwnerLabels
from gitdns.core.validate import check
from tests.core.planner_kit import ZONE, Zone

ROOT = Path(__file__).resolve().parent.parent
OTHER = "6e2f9b41-0a7d-4c35-b8e6-2f1a9d4c7b58"
ME = "3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63"

HEAD = "apiVersion: gitdns.io/v1alpha1\n"
ZONE_DOC = (f"{HEAD}kind: Zone\nmetadata: {{name: example-com}}\n"
            "spec: {domain: example.com, provider: {type: local}}\n")


def _records(*rows: str) -> dict[str, str]:
    body = "".join(f"    - {row}\n" for row in rows)
    doc = f"{HEAD}kind: RecordSet\nmetadata: {{name: static}}\nspec:\n  zone: example-com\n  records:\n{body}"
    return {"zones.yaml": ZONE_DOC, "records.yaml": doc}


def _problems(files: dict[str, str]) -> list[Problem]:
    return check(files, load_schemas()).problems


# --- through validation: file, line, field; the attacks of the issue -------------------------


@pytest.mark.parametrize(("row", "code"), [
    ("{name: mail, type: A, values: [not-an-ip]}", "InvalidAddress"),
    ('{name: "@", type: TXT, values: ["v=spf1\\n-all"]}', "InvalidRecordValue"),
    ('{name: "@", type: TXT, values: ["v=spf1 -all\\u0000"]}', "InvalidRecordValue"),
    ("{name: '@', type: MX, values: [mail.example.com]}", "InvalidRecordValue"),
    ("{name: _sip._tcp, type: SRV, values: ['10 5 sip.example.com.']}", "InvalidRecordValue"),
    ("{name: '@', type: CAA, values: ['0 issue \"letsencrypt.org']}", "InvalidRecordValue"),
    ("{name: www, type: CNAME, values: ['*.example.com']}", "InvalidRecordValue"),
])
def test_a_bad_record_value_is_a_problem_at_its_value(row: str, code: str) -> None:
    problems = _problems(_records("{name: ok, type: A, values: [192.0.2.1]}", row))
    assert [(p.file, p.yaml_path, p.line, p.code, p.zones) for p in problems] == [
        ("records.yaml", "spec.records[1].values[0]", 8, code, ("example-com",))]


def test_a_trailing_newline_is_refused_in_names_ids_and_values() -> None:
    cluster = (f"{HEAD}kind: Cluster\nmetadata: {{name: eu}}\nspec:\n  id: \"{ME}\\n\"\n  gateways:\n"
               "    - {name: gw, namespace: ns, addresses: [192.0.2.1], listeners: [{hostname: api.example.com}]}\n")
    tenant = f'{HEAD}kind: Tenant\nmetadata: {{name: "evil\\n"}}\nspec: {{nodePool: edge, domains: [a.tenant-a.io]}}\n'
    zone = ZONE_DOC.replace("domain: example.com", 'domain: "example.com\\n"')
    problems = _problems({"zones.yaml": zone, "cluster.yaml": cluster, "tenant.yaml": tenant})
    found = {(p.file, p.yaml_path) for p in problems}
    assert {("cluster.yaml", "spec.id"), ("tenant.yaml", "metadata.name"), ("zones.yaml", "spec.domain")} <= found


@pytest.mark.parametrize("name", [
    f"{TXT_PREFIX}2tqs20a7-a-www", f"{TXT_PREFIX}a-www", "kuadrant-active-groups", f"{HEARTBEAT_PREFIX}x",
    "*.kuadrant-2tqs20a7-a-www.example.com.", "gitdns-lock-abc",
])
def test_a_record_in_the_registry_namespace_is_refused(name: str) -> None:
    row = f'{{name: "{name}", type: TXT, values: ["hello"]}}'
    problems = _problems(_records(row))
    assert [(p.yaml_path, p.code) for p in problems] == [("spec.records[0].name", "ReservedRecordName")]


def test_a_record_name_over_253_characters_is_refused() -> None:
    long = ".".join(["a" * 60] * 4)  # 243 characters, relative: with .example.com it is 255
    problems = _problems(_records(f"{{name: {long}, type: A, values: [192.0.2.1]}}"))
    assert [(p.yaml_path, p.code) for p in problems] == [("spec.records[0].name", "InvalidHostname")]


@pytest.mark.parametrize("group", ["site=a", "site\na", "site\\a", "sité", "a,b"])
def test_a_group_name_that_could_inject_a_label_is_refused(group: str) -> None:
    assert any(ch in GROUP_FORBIDDEN or not ch.isascii() for ch in group)
    doc = (f"{HEAD}kind: ActiveGroups\nmetadata: {{name: g}}\nspec:\n  zone: example-com\n  serial: 1\n"
           f"  groups: [{group.encode('unicode_escape').decode()!r}]\n".replace("'", '"'))
    problems = _problems({"zones.yaml": ZONE_DOC, "groups.yaml": doc})
    assert [(p.yaml_path, p.code) for p in problems] == [("spec.groups[0]", "InvalidGroupName")]


# --- the ownership TXT: nothing injected, nothing misread -------------------------------------


@pytest.mark.parametrize("field", ["owner", "group", "rev"])
@pytest.mark.parametrize("bad", [",", "=", '"', ";", " ", "\n", "\\"])
def test_an_owner_group_or_rev_that_could_inject_a_label_is_never_written(field: str, bad: str) -> None:
    labels = OwnerLabels(**{"owner": ME, field: f"x{bad}external-dns/owner={OTHER}"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=f"label {field}"):
        registry.encode(labels)


def test_no_heartbeat_for_an_owner_id_that_could_add_a_field() -> None:
    with pytest.raises(ValueError):
        heartbeat_record("a,time=1", ZONE, 0)
    assert heartbeat_record(ME, ZONE, 0).values == (f"owner={ME},time=0",)


@pytest.mark.parametrize("value", ["x,external-dns/owner=" + OTHER, "a;b", "tab\there"])
def test_targets_that_could_inject_are_left_out_and_the_owner_claims_the_record(value: str) -> None:
    text, fitted = registry.encode(OwnerLabels(ME, targets=(value,)))
    assert not fitted and "targets" not in text
    decoded = registry.decode(text)
    assert decoded is not None and decoded.owner == ME and decoded.targets is None


@pytest.mark.parametrize("targets", [("v=spf1 mx -all",), ('0 iodef "mailto:a@example.com"', '0 issue "ca.test"'),
                                     ("back\\slash",), ('"',)])
def test_targets_with_blanks_equals_and_quotes_are_read_back_as_written(targets: tuple[str, ...]) -> None:
    text, fitted = registry.encode(OwnerLabels(ME, targets=targets))
    assert fitted
    decoded = registry.decode(text)
    assert decoded is not None and decoded.owner == ME and decoded.targets == targets


def test_targets_that_would_end_the_value_with_a_quote_are_left_out() -> None:
    text, fitted = registry.encode(OwnerLabels(ME, version=None, targets=('0 issue "ca.test"',)))
    assert not fitted and "targets" not in text


def test_a_label_given_twice_counts_once_the_first() -> None:
    text = (f"heritage=external-dns,external-dns/owner={ME},external-dns/targets=x,external-dns/owner={OTHER},"
            "external-dns/version=1")
    decoded = registry.decode(text)
    assert decoded is not None and decoded.owner == ME


def test_a_txt_value_that_looks_like_ownership_labels_does_not_make_the_record_foreign() -> None:
    """The issue's attack: gitdns showed its own record as FOREIGN (ForeignRecordInTheWay, for ever)."""
    zone = Zone()
    poison = RecordSet(f"www.{ZONE}", "TXT", 60, (f"x,external-dns/owner={OTHER}",))
    first = zone.sync(ME, [poison])
    assert first.conflicts == ()
    [txt] = [r for r in zone.records.values() if r.name.startswith(TXT_PREFIX)]
    entry = registry.decode_entry(txt)
    assert entry is not None and entry.owner == ME and OTHER not in txt.values[0]
    again = zone.plan(ME, [poison])
    assert again.conflicts == () and again.applicable == ()
    assert any("targets label cannot carry" in note for note in first.notes)


def test_a_zone_poisoned_by_the_old_encoding_heals() -> None:
    poison = RecordSet(f"www.{ZONE}", "TXT", 60, (f"x,external-dns/owner={OTHER}",))
    old = RecordSet(registry.txt_name(ME, "TXT", poison.name), "TXT", 60, (
        f"heritage=external-dns,external-dns/owner={ME},external-dns/rev=1700000000.1111111,"
        f"external-dns/targets=x,external-dns/owner={OTHER},external-dns/version=1",))
    zone = Zone([poison, old])
    healed = zone.sync(ME, [poison])
    assert healed.conflicts == ()
    [txt] = [r for r in zone.records.values() if r.name.startswith(TXT_PREFIX)]
    assert OTHER not in txt.values[0]
    assert zone.plan(ME, [poison]).applicable == ()


# --- end to end: apply writes nothing; the poisoned record stays gitdns's own ----------------


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    dest = tmp_path / "repo"
    shutil.copytree(ROOT / "example-repo", dest, ignore=shutil.ignore_patterns(".gitdns"))
    return dest


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _add_record(repo: Path, *lines: str) -> None:
    path = repo / "records" / "example-com.yaml"
    path.write_text(path.read_text() + "".join(f"{line}\n" for line in lines))


def _txt_newline(repo: Path) -> str:
    _add_record(repo, "    - name: txt", "      type: TXT", '      values: ["v=spf1\\n-all"]')
    return f"records/example-com.yaml:{_lines(repo / 'records' / 'example-com.yaml')}: spec.records[6].values[0]"


def _a_not_an_ip(repo: Path) -> str:
    _add_record(repo, "    - name: bad", "      type: A", "      values: [not-an-ip]")
    return f"records/example-com.yaml:{_lines(repo / 'records' / 'example-com.yaml')}: spec.records[6].values[0]"


def _cluster_id_newline(repo: Path) -> str:
    path = repo / "clusters" / "eu-west-1.yaml"
    text = path.read_text()
    path.write_text(text.replace(f"id: {ME}", f'id: "{ME}\\n"'))
    line = text[: text.index(f"id: {ME}")].count("\n") + 1
    return f"clusters/eu-west-1.yaml:{line}: spec.id"


def _lines(path: Path) -> int:
    return path.read_text().count("\n")


@pytest.mark.parametrize("edit", [_txt_newline, _a_not_an_ip, _cluster_id_newline],
                         ids=["txt-newline", "a-not-an-ip", "cluster-id-newline"])
def test_apply_holds_the_zone_and_writes_nothing(repo: Path, capsys: pytest.CaptureFixture[str],
                                                 edit: Callable[[Path], str]) -> None:
    assert _run(capsys, "apply", "--repo", str(repo), "--all-clusters")[0] == EXIT_OK
    store = repo / ".gitdns" / "zones" / "example.com.json"
    before = store.read_bytes()
    where = edit(repo)
    code, _, err = _run(capsys, "apply", "--repo", str(repo), "--all-clusters")
    assert code == EXIT_ERROR
    assert where in err and "Traceback" not in err
    assert store.read_bytes() == before


def test_a_txt_value_with_ownership_labels_stays_the_clusters_own(repo: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    _add_record(repo, "    - name: poison", "      type: TXT", f'      values: ["x,external-dns/owner={OTHER}"]')
    assert _run(capsys, "apply", "--repo", str(repo), "--all-clusters")[0] == EXIT_OK
    code, out, _ = _run(capsys, "plan", "--repo", str(repo), "--all-clusters", "--exit-code")
    assert code == EXIT_OK and "ForeignRecordInTheWay" not in out
    code, out, _ = _run(capsys, "zone", "show", "example.com", "--repo", str(repo), "--format", "json")
    [record] = [r for r in json.loads(out)["records"] if r["name"] == "poison.example.com"]
    assert not record["foreign"]
    assert sorted(record["owners"]) == ["eu-central-1", "eu-west-1", "us-east-1"]
