"""`gitdns import`: every record set of a zone lands in exactly one place (imported, managed by
its owner, the provider's, or not imported with why), what is imported loads back through the
real loader as the same static records, and outside text (names, values, a file's bytes)
cannot break the YAML, a file name or the report.  Round trips on real servers are in
tests/e2e/test_import_roundtrip.py."""

from __future__ import annotations

import io
import json
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gitdns.cli import main
from gitdns.core.builder import static_records
from gitdns.core.importing import documents, sort_zone
from gitdns.core.records import RecordKey, RecordSet, ZoneSnapshot
from gitdns.core.registry import OwnerLabels, ownership_record

ZONE = "example.com"
ZONE_DOC = ("apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata: {name: example-com}\n"
            f"spec:\n  domain: {ZONE}\n  provider: {{type: local, settings: {{path: zones}}}}\n")

labels = st.from_regex(r"[a-z0-9_][a-z0-9_-]{0,8}[a-z0-9]|[A-Z]{1,3}|\*|x y|a\.\.b|é", fullmatch=True)
good_values = {
    "A": st.ip_addresses(v=4).map(str),
    "AAAA": st.ip_addresses(v=6).map(str),
    "CNAME": st.from_regex(r"[a-z]{1,8}\.example\.(net|com)", fullmatch=True),
    "NS": st.from_regex(r"ns[0-9]\.example\.net", fullmatch=True),
    "MX": st.integers(0, 65535).map(lambda n: f"{n} mail.example.net."),
    "SRV": st.tuples(st.integers(0, 9), st.integers(0, 9), st.integers(1, 65535)).map(
        lambda t: f"{t[0]} {t[1]} {t[2]} sip.example.net."),
    "CAA": st.sampled_from(['0 issue "letsencrypt.org"', '128 iodef "mailto:a@example.com"']),
    "TXT": st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=40),
}
any_text = st.text(min_size=1, max_size=30)


@st.composite
def zone_snapshots(draw: st.DrawFn) -> tuple[ZoneSnapshot, int]:
    """A zone with good and bad records of every type, owned ones (with their TXT), weighted
    rows, the apex NS and skipped types; and how many data record sets it holds."""
    records: dict[RecordKey, RecordSet] = {}
    owned_txt: list[RecordSet] = []
    for _ in range(draw(st.integers(0, 25))):
        rel = draw(st.lists(labels, min_size=0, max_size=3))
        name = ".".join([*rel, ZONE]).lower()
        rtype = draw(st.sampled_from(sorted(good_values)))
        values = tuple(draw(st.lists(st.one_of(good_values[rtype], any_text) if draw(st.booleans()) else
                                     good_values[rtype], min_size=1, max_size=3)))
        ttl = draw(st.sampled_from([0, 1, 60, 300, 604800, 604801]))
        routed = draw(st.integers(0, 9)) == 0
        rec = RecordSet(name, rtype, ttl, values, set_id="s1" if routed else "", weight=5 if routed else None)
        if rec.key in records:
            continue
        records[rec.key] = rec
        if draw(st.integers(0, 5)) == 0:
            txt, _ = ownership_record(rec, OwnerLabels(owner=draw(st.sampled_from(["o-1", "o-2"]))), ZONE)
            if txt.key not in records:
                owned_txt.append(txt)
    records[RecordKey(ZONE, "NS")] = RecordSet(ZONE, "NS", 3600, ("ns1.example.net",))
    skipped = tuple(RecordKey(f"{i}.{ZONE}", t) for i, t in enumerate(draw(st.lists(
        st.sampled_from(["PTR", "SSHFP", "DNSKEY", "TLSA"]), max_size=3))))
    data = len(records)
    return ZoneSnapshot(ZONE, (*records.values(), *owned_txt), skipped=skipped), data


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(zone_snapshots())
def test_every_record_set_lands_in_one_place_and_what_is_imported_loads_back(case: tuple[ZoneSnapshot, int]) -> None:
    from gitdns.commands.importzone import _yaml_text, vet
    from gitdns.reconcile.engine import load

    snapshot, data = case
    result = sort_zone(snapshot)
    assert result.total == data + len(snapshot.skipped)
    assert vet(result, {"zone.yaml": ZONE_DOC}, "example-com", ZONE, "example-com") == []
    assert result.total == data + len(snapshot.skipped)  # what the gate took out is still named
    placed = [r.key for r in result.records] + [k for ks in result.managed.values() for k in ks] + \
        result.provider + [r.key for r in result.refused]
    assert len(placed) == len(set(placed))  # each once
    for split in (False, True):
        docs = documents(result.records, ZONE, "example-com", "example-com", split)
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            (root / "zone.yaml").write_text(ZONE_DOC)
            for i, doc in enumerate(docs):
                assert doc.stem and set(doc.stem) <= set("abcdefghijklmnopqrstuvwxyz0123456789-")
                (root / f"r{i}.yaml").write_text(_yaml_text([doc], ZONE))
            desired = load(root)
            assert [p.format() for p in desired.problems] == []
            zone = desired.state.zone("example-com")
            assert zone is not None
            loaded = {(r.name, r.type): (r.ttl, r.values) for r in static_records(desired.state, zone)}
        assert loaded == {(r.name, r.type): (r.ttl, r.values) for r in result.records}


def test_managed_records_name_their_owner_and_their_txt_is_never_data() -> None:
    rec = RecordSet(f"api.{ZONE}", "A", 60, ("192.0.2.1",))
    txt, _ = ownership_record(rec, OwnerLabels(owner="c-uid"), ZONE)
    result = sort_zone(ZoneSnapshot(ZONE, (rec, txt)), names={"c-uid": "eu-west-1"})
    assert result.records == [] and result.managed == {"eu-west-1": [rec.key]} and result.ownership_txt == 1


def test_the_target_providers_types_and_routing_are_named() -> None:
    caa = RecordSet(f"a.{ZONE}", "CAA", 60, ('0 issue "x.org"',))
    weighted = RecordSet(f"w.{ZONE}", "A", 60, ("192.0.2.1",), set_id="eu", weight=10)
    result = sort_zone(ZoneSnapshot(ZONE, (caa, weighted)), types=frozenset({"A"}), target="azure")
    assert [r.line() for r in result.refused] == [
        f"a.{ZONE} CAA: record type CAA is not supported by azure",
        f"w.{ZONE} A [eu]: a weighted row (set identifier 'eu') cannot be a RecordSet record: a DNSPolicy "
        "publishes weighted and geo rows"]


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_a_master_file_to_stdout_is_yaml_only_and_the_report_goes_to_stderr(tmp_path: Path) -> None:
    master = tmp_path / "db"
    master.write_text("$TTL 300\n@ SOA ns1 host 1 2 3 4 5\n@ NS ns1\nwww 60 A 192.0.2.1\nptr PTR x.\n")
    code, out, err = run("import", ZONE, "--from", str(master))
    assert code == 0
    assert out.startswith("# gitdns import of zone example.com") and "ptr" not in out
    assert "www.example.com." in out
    assert "ptr.example.com PTR: record type PTR is not supported" in err
    assert "left to the provider: example.com NS" in err


def test_a_master_file_that_does_not_parse_names_the_file_and_line(tmp_path: Path) -> None:
    master = tmp_path / "db"
    master.write_text("$TTL 300\nwww A 192.0.2.1\nbad A not-an-address\n")
    code, out, err = run("import", ZONE, "--from", str(master))
    assert code == 1 and out == ""
    assert f"{master}:3" in err and "Traceback" not in err


@pytest.mark.parametrize("text", ["$INCLUDE /etc/hostname\n", "www A 192.0.2.1\n\x1b[31m A 1.2.3.4\n",
                                  "www TXT \"\\027[2J\"\n"])
def test_hostile_master_files_are_refused_or_escaped(tmp_path: Path, text: str) -> None:
    master = tmp_path / "db"
    master.write_text(text)
    code, out, err = run("import", ZONE, "--from", str(master))
    assert "\x1b" not in out and "\x1b" not in err
    assert code in (0, 1) and "Traceback" not in err


def test_split_needs_a_directory_and_nothing_is_overwritten(tmp_path: Path) -> None:
    master = tmp_path / "db"
    master.write_text("$TTL 300\nwww A 192.0.2.1\n_sip._tcp SRV 1 1 5060 sip\n*.w CNAME www\n@ MX 10 mail\n")
    code, _, err = run("import", ZONE, "--from", str(master), "--split")
    assert code == 1 and "--out DIR" in err
    out = tmp_path / "records"
    assert run("import", ZONE, "--from", str(master), "--split", "--out", str(out))[0] == 0
    assert sorted(p.name for p in out.iterdir()) == ["apex.yaml", "u-tcp.yaml", "w.yaml", "www.yaml"]
    before = {p.name: p.read_text() for p in out.iterdir()}
    code, _, err = run("import", ZONE, "--from", str(master), "--split", "--out", str(out))
    assert code == 1 and "nothing written" in err
    assert {p.name: p.read_text() for p in out.iterdir()} == before


def test_from_the_local_store_of_a_repository(tmp_path: Path) -> None:
    """The example repository applied to its `local` store, imported back: every record an
    agent wrote is managed by its cluster, the static records are imported."""
    import shutil

    repo = tmp_path / "repo"
    shutil.copytree(Path(__file__).resolve().parents[2] / "example-repo", repo,
                    ignore=shutil.ignore_patterns(".gitdns"))
    assert run("apply", "--repo", str(repo), "--all-clusters")[0] in (0, 5)
    code, out, err = run("import", "example-com", "--from", "provider", "--repo", str(repo), "--format", "json")
    assert code == 0, err
    report = json.loads(out)
    clusters = {"eu-west-1", "eu-central-1", "us-east-1"}
    owners = {o for joint in report["managed"] for o in joint.split(",")}
    assert owners and owners <= clusters  # every owner named by its Cluster, none by a raw id
    imported = {(r["name"], r["type"]) for d in report["documents"] for r in d["spec"]["records"]}
    assert all(d["spec"]["zone"] == "example-com" for d in report["documents"])
    # the example's static records (records/example-com.yaml) are claimed by the clusters that
    # applied them: managed, not imported again
    assert ("@", "MX") not in imported and ("www", "CNAME") not in imported
    managed = {k["name"] for keys in report["managed"].values() for k in keys}
    assert "example.com" in managed and "www.example.com" in managed


def test_import_writes_nothing_to_the_zone(tmp_path: Path) -> None:
    """The zone's store is byte for byte the same after an import from it."""
    import shutil

    repo = tmp_path / "repo"
    shutil.copytree(Path(__file__).resolve().parents[2] / "example-repo", repo,
                    ignore=shutil.ignore_patterns(".gitdns"))
    run("apply", "--repo", str(repo), "--all-clusters")
    store = repo / ".gitdns"
    before = {p: p.read_bytes() for p in store.rglob("*") if p.is_file()}
    assert run("import", "example.com", "--from", "provider", "--repo", str(repo), "--out",
               str(tmp_path / "out.yaml"))[0] == 0
    assert {p: p.read_bytes() for p in store.rglob("*") if p.is_file()} == before
