"""The traffic split of loadbalanced hosts and its before/after renderings (gitdns/core/split.py,
docs/records.md "Reading the traffic split").

Zones are built the way clusters build them: the record builder's records applied by the
planner (ownership TXT included), or data records with ownership TXT from the registry.
Hostile host names, geo codes, targets and cluster names must leave the Mermaid block one
fenced block (markdown-it-py) with every label quoted and escaped; where Mermaid itself can run
(``GITDNS_MERMAID_DIR``: a directory whose node_modules holds mermaid 11 and jsdom), its parser
reads exactly the nodes, edges and labels gitdns wrote.
"""

from __future__ import annotations

import dataclasses
import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from gitdns.core import builder
from gitdns.core import names as dns_names
from gitdns.core.model import Cluster, CustomWeight, DesiredState
from gitdns.core.records import RecordSet, ZoneSnapshot
from gitdns.core.registry import OwnerLabels, ownership_record
from gitdns.core.split import (
    Pool,
    Split,
    SplitChange,
    Target,
    changed_splits,
    mermaid_label,
    split_mermaid,
    split_table,
    split_text,
    traffic_splits,
)
from gitdns.core.text import inline
from tests.conftest import worked_example_records
from tests.core import worked_example as we
from tests.core.planner_kit import Zone

HOST = we.HOST
KLB = f"klb.{HOST}"
EU, US = f"geo-eu.{KLB}", f"us.{KLB}"
A_EU, B_US = f"1hrxie-30ics1.{KLB}", f"17ol5y-30ics1.{KLB}"
CLUSTER_C = we.cluster("cluster-c", "cluster-c-uid", "3.3.3.3", "GEO-EU")
C_EU = dns_names.cluster_target_name(HOST, CLUSTER_C.id, "api-gw", "ingress")
NAMES = {c.id: c.name for c in (we.CLUSTER_A, we.CLUSTER_B, CLUSTER_C)}
_MD = MarkdownIt("commonmark").enable("table")


def published(state: DesiredState = we.STATE, clusters: tuple[Cluster, ...] = (we.CLUSTER_A, we.CLUSTER_B),
              zone: Zone | None = None) -> Zone:
    zone = zone or Zone()
    for c in clusters:
        zone.sync(c.id, builder.desired_for_zone(state, c, we.ZONE))
    return zone


def three_clusters() -> tuple[DesiredState, Zone]:
    state = dataclasses.replace(we.STATE, clusters=(we.CLUSTER_A, we.CLUSTER_B, CLUSTER_C))
    return state, published(state, state.clusters)


def reweighted(snapshot: ZoneSnapshot, target: str, weight: int) -> ZoneSnapshot:
    recs = tuple(dataclasses.replace(r, weight=weight) if r.set_id == target and r.type == "CNAME" else r
                 for r in snapshot.records)
    return dataclasses.replace(snapshot, records=recs)


# -- the worked example ---------------------------------------------------------------------

def test_worked_example_two_geos_each_100_percent() -> None:
    zone = published()
    data = {r for r in zone.snapshot().records if r.type != "TXT"}
    assert data == set(worked_example_records())
    assert traffic_splits(zone.snapshot(), NAMES) == {HOST: Split(HOST, KLB, (
        Pool(EU, ("GEO-EU", "*"), (Target(A_EU, 120, 1.0, ("cluster-a",)),)),
        Pool(US, ("US",), (Target(B_US, 120, 1.0, ("cluster-b",)),)),
    ))}


def test_without_names_the_owner_ids_show() -> None:
    split = traffic_splits(published().snapshot())[HOST]
    assert [t.owners for p in split.pools for t in p.targets] == [("cluster-a-uid",), ("cluster-b-uid",)]


def test_a_zone_without_ownership_shows_foreign_rows() -> None:
    snap = ZoneSnapshot("example.com", worked_example_records())
    split = traffic_splits(snap, NAMES)[HOST]
    assert [t.owners for p in split.pools for t in p.targets] == [(), ()]
    assert "foreign (no ownership record)" in split_table(SplitChange(HOST, None, split))[2]


def test_no_geo_section_a_plain_cname_to_default() -> None:
    state = dataclasses.replace(we.STATE, policies=(dataclasses.replace(we.POLICY, default_geo=None),))
    split = traffic_splits(published(state).snapshot(), NAMES)[HOST]
    assert split.pools == (Pool(f"default.{KLB}", ("",), (
        Target(B_US, 120, 0.5, ("cluster-b",)),
        Target(A_EU, 120, 0.5, ("cluster-a",)),
    )),)
    change = changed_splits(None, published(state).snapshot(), NAMES)[0]
    assert "any (no geo)" in split_table(change)[2]


# -- what changed ---------------------------------------------------------------------------

WEIGHT_CHANGE_TABLE = [
    "| geo | cluster | target | weight | share |",
    "|---|---|---|---|---|",
    f"| `GEO-EU, default (*)` | `cluster-a` | `{A_EU}` | 120 → 240 | 50% → 67% |",
    f"| `GEO-EU, default (*)` | `cluster-c` | `{C_EU}` | 120 | 50% → 33% |",
    f"| `US` | `cluster-b` | `{B_US}` | 120 | 100% |",
]

WEIGHT_CHANGE_MERMAID = f"""```mermaid
flowchart LR
  subgraph n1["before"]
    n2["{HOST}"]
    n3["{EU}"]
    n2 -->|"GEO-EU"| n3
    n2 -->|"default (*)"| n3
    n4["cluster-a<br/>{A_EU}"]
    n3 -->|"120 (50#37;)"| n4
    n5["cluster-c<br/>{C_EU}"]
    n3 -->|"120 (50#37;)"| n5
    n6["{US}"]
    n2 -->|"US"| n6
    n7["cluster-b<br/>{B_US}"]
    n6 -->|"120 (100#37;)"| n7
  end
  subgraph n8["after"]
    n9["{HOST}"]
    n10["{EU}"]
    n9 -->|"GEO-EU"| n10
    n9 -->|"default (*)"| n10
    n11["cluster-a<br/>{A_EU}"]
    n10 -->|"240 (67#37;)"| n11
    n12["cluster-c<br/>{C_EU}"]
    n10 -->|"120 (33#37;)"| n12
    n13["{US}"]
    n9 -->|"US"| n13
    n14["cluster-b<br/>{B_US}"]
    n13 -->|"120 (100#37;)"| n14
  end
```
"""


def test_weight_120_to_240_with_two_clusters_in_the_geo_is_67_33() -> None:
    state, zone = three_clusters()
    before = zone.snapshot()
    policy = dataclasses.replace(we.POLICY, custom_weights=(CustomWeight("tier", "big", 240),))
    big = dataclasses.replace(we.CLUSTER_A, attributes=(("tier", "big"),))
    state = dataclasses.replace(state, policies=(policy,), clusters=(big, we.CLUSTER_B, CLUSTER_C))
    published(state, (big,), zone)
    (change,) = changed_splits(before, zone.snapshot(), NAMES)
    eu = change.after.pools[0] if change.after else None
    assert eu is not None and [(t.weight, round(t.share, 4)) for t in eu.targets] == [(240, 0.6667), (120, 0.3333)]
    assert split_table(change) == WEIGHT_CHANGE_TABLE
    assert split_mermaid(change) == WEIGHT_CHANGE_MERMAID
    assert split_text(change) == [
        f"{HOST}: traffic split changed",
        f"  {EU} (geo GEO-EU, default (*))",
        f"    cluster-a  {A_EU}  weight 120 -> 240  share 50% -> 67%",
        f"    cluster-c  {C_EU}  weight 120  share 50% -> 33%",
        f"  {US} (geo US)",
        f"    cluster-b  {B_US}  weight 120  share 100%",
    ]


def test_unchanged_splits_are_left_out() -> None:
    snap = published().snapshot()
    assert changed_splits(snap, snap, NAMES) == []
    ttl_only = dataclasses.replace(snap, records=tuple(dataclasses.replace(r, ttl=30) for r in snap.records))
    assert changed_splits(snap, ttl_only, NAMES) == []


def test_a_withdrawn_target_weight_0() -> None:
    _, zone = three_clusters()
    before = zone.snapshot()
    after = reweighted(before, C_EU, 0)
    (change,) = changed_splits(before, after, NAMES)
    assert change.after is not None
    eu = change.after.pools[0]
    assert [(t.target, t.share, t.withdrawn) for t in eu.targets] == [(A_EU, 1.0, False), (C_EU, 0.0, True)]
    assert split_table(change)[3] == \
        f"| `GEO-EU, default (*)` | `cluster-c` | `{C_EU}` | 120 → 0 (withdrawn) | 50% → 0% |"
    assert '-.->|"0 (0#37;) withdrawn"|' in split_mermaid(change)
    assert "weight 120 -> 0 (withdrawn)" in split_text(change)[3]


def test_every_target_withdrawn_shares_are_0() -> None:
    snap = reweighted(published().snapshot(), A_EU, 0)
    eu = traffic_splits(snap, NAMES)[HOST].pools[0]
    assert [(t.weight, t.share) for t in eu.targets] == [(0, 0.0)]


def test_a_host_added_and_removed() -> None:
    zone = published(clusters=(we.CLUSTER_A,))
    (added,) = changed_splits(None, zone.snapshot(), NAMES)
    assert added.before is None and added.after is not None
    assert split_table(added)[2:] == [
        f"| — → `GEO-EU, default (*)` | — → `cluster-a` | `{A_EU}` | — → 120 | — → 100% |"]
    assert split_text(added)[0] == f"{HOST}: new loadbalanced host"
    assert 'n2["not loadbalanced"]' in split_mermaid(added)
    (removed,) = changed_splits(zone.snapshot(), ZoneSnapshot("example.com", ()), NAMES)
    assert removed.after is None
    assert split_text(removed)[0] == f"{HOST}: no longer loadbalanced"


def test_a_cluster_joining_another_geo() -> None:
    zone = published(clusters=(we.CLUSTER_A,))
    before = zone.snapshot()
    published(clusters=(we.CLUSTER_B,), zone=zone)
    (change,) = changed_splits(before, zone.snapshot(), NAMES)
    assert split_table(change)[2:] == [
        f"| `GEO-EU, default (*)` | `cluster-a` | `{A_EU}` | 120 | 100% |",
        f"| — → `US` | — → `cluster-b` | `{B_US}` | — → 120 | — → 100% |",
    ]


def test_a_geo_row_without_weighted_rows() -> None:
    recs = [r for r in worked_example_records() if r.name != US]
    split = traffic_splits(ZoneSnapshot("example.com", tuple(recs)))[HOST]
    assert split.pools[1] == Pool(US, ("US",), ())
    change = SplitChange(HOST, None, split)
    assert split_table(change)[3] == f"| — → `US` | — | no weighted row at `{US}` | — | — |"
    assert "no weighted row" in split_mermaid(change)


# -- hostile names --------------------------------------------------------------------------

MARK = "FORGED"
CONTROLS = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))]
FORMATS = [chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A), 0x2028, 0x2029, 0xFEFF, 0x200B)]
SEQUENCES = ["\x1b]52;c;SGVsbG8=\x07", "\x1b[2J", "\r\n"]
MARKDOWN = ["|", "`", "```", "~~~", "*", "_", "<b>", "](x)", "[x", "@team", "#1", "\\", "> ", "<!--"]
MERMAID = ['"', '"]', "-->", "--", "|", "#quot;", "#35;", "%%{init: {'theme':'dark'}}%%", "%%", "end", "subgraph",
           "style a fill:#f00;", "classDef x fill:#f00;", ";", ":::", "[", "]", "(", ")", "{", "}", "&amp;", "<br>"]
_pieces = st.one_of(st.sampled_from(CONTROLS + FORMATS + SEQUENCES + MARKDOWN + MERMAID),
                    st.text(alphabet="ab.-", max_size=3))
HOSTILE = st.lists(_pieces, min_size=1, max_size=6).map(lambda parts: "x" + "".join(parts) + "\n" + MARK)
ALL_IN_ONE = "".join(SEQUENCES + FORMATS + CONTROLS + MARKDOWN + MERMAID)


def hostile_zone(host_label: str, geo: str, target: str) -> ZoneSnapshot:
    """A loadbalanced host owned by ``cluster-a-uid``, every name from outside (record names
    lower-case, as a zone holds them: the ownership TXT name is read lower-cased)."""
    host, target = f"{host_label}.example.com".lower(), target.lower()
    klb, pool = dns_names.klb_name(host), dns_names.geo_name(host, geo)
    data = [RecordSet(host, "CNAME", 300, (klb,)),
            RecordSet(klb, "CNAME", 300, (pool,), set_id=geo, geo=geo),
            RecordSet(klb, "CNAME", 300, (pool,), set_id="default", geo="*"),
            RecordSet(pool, "CNAME", 60, (target,), set_id=target, weight=120)]
    txt = [ownership_record(r, OwnerLabels("cluster-a-uid", targets=r.values), "example.com")[0] for r in data]
    return ZoneSnapshot("example.com", (*data, *txt))


_LINE = re.compile(r'  (?:subgraph n\d+\["([^"]*)"\]|end|  n\d+\["([^"]*)"\]|  n\d+ -(?:->|\.->)\|"([^"]*)"\| n\d+)')


def labels(diagram: str) -> list[str]:
    """The labels of a diagram ``split_mermaid`` wrote, checking every line is one it writes."""
    lines = diagram.split("\n")
    assert lines[:2] == ["```mermaid", "flowchart LR"] and lines[-2:] == ["```", ""]
    found: list[str] = []
    for line in lines[2:-2]:
        match = _LINE.fullmatch(line)
        assert match, f"a line split_mermaid does not write: {line!r}"
        found.extend(g for g in match.groups() if g is not None)
    return found


def decoded(label: str) -> list[str]:
    """A label's parts as they read: Mermaid's ``#34;`` entities undone."""
    return [html.unescape(re.sub(r"#(\d+);", r"&#\1;", part)) for part in label.split("<br/>")]


def check_label(label: str) -> None:
    bare = re.sub(r"#\d+;", "", label.replace("<br/>", ""))
    assert not set(bare) & set('"#<>`|\\%&:;[]{}'), label
    assert bare.isprintable(), label


def check_markdown_table(rows: list[str]) -> None:
    text = "\n".join(rows) + "\n"
    assert text.replace("\n", "").isprintable()
    tokens = _MD.parse(text)
    cells = [t for t in tokens if t.type in ("th_open", "td_open")]
    assert len(cells) == 5 * len(rows[1:]), "a value added or ended a table cell"
    for token in tokens:
        for child in token.children or ():
            assert MARK.lower() not in child.content.lower() or child.type == "code_inline", child


@settings(max_examples=150, deadline=None)
@given(host=HOSTILE, geo=HOSTILE, target=HOSTILE, cluster=HOSTILE)
def test_hostile_names_stay_inside_their_labels_and_cells(host: str, geo: str, target: str, cluster: str) -> None:
    (change,) = changed_splits(None, hostile_zone(host, geo, target), {"cluster-a-uid": cluster})
    diagram = split_mermaid(change)
    tokens = _MD.parse(diagram)
    assert [(t.type, t.info) for t in tokens] == [("fence", "mermaid")]
    assert tokens[0].content == diagram.split("\n", 1)[1].rsplit("```", 1)[0]
    found = labels(diagram)
    for label in found:
        check_label(label)
    assert [inline(f"{host}.example.com".lower())] in [decoded(label) for label in found]
    assert [inline(cluster), inline(target.lower())] in [decoded(label) for label in found]
    assert [inline(geo)] in [decoded(label) for label in found]
    check_markdown_table(split_table(change))
    for line in split_text(change):
        assert line.isprintable() and not line.lstrip().lower().startswith(MARK.lower())


def test_mermaid_label_escapes() -> None:
    assert mermaid_label('a"b#c<d>e`f|g\nh%%{i}') == "a#34;b#35;c#60;d#62;e#96;f#124;g#92;nh#37;#37;#123;i#125;"
    assert mermaid_label("plain-name.example.com") == "plain-name.example.com"


# -- Mermaid's own parser -------------------------------------------------------------------

PEERS = Path(__file__).resolve().parents[2] / ".peers" / "mermaid"  # scripts/install-test-deps.sh installs it


def mermaid_dir() -> Path:
    """Where mermaid and jsdom are installed: GITDNS_MERMAID_DIR, else .peers/mermaid.  Missing:
    a skip on a developer's machine, a failure in CI (CI=true)."""
    where = Path(os.environ.get("GITDNS_MERMAID_DIR") or PEERS)
    if not (where / "node_modules" / "mermaid").is_dir() or shutil.which("node") is None:
        why = ("Mermaid's parser needs node and mermaid@11 with jsdom in GITDNS_MERMAID_DIR or .peers/mermaid "
               "(bash scripts/install-test-deps.sh installs them)")
        if os.environ.get("CI") == "true":
            pytest.fail(why)
        pytest.skip(why)
    return where


def mermaid_parse(diagrams: list[str]) -> list[dict[str, object]]:
    script = Path(__file__).with_name("mermaid_parse.mjs")
    bodies = [d.split("\n", 1)[1].rsplit("```", 1)[0] for d in diagrams]
    run = subprocess.run(["node", str(script), str(mermaid_dir())], input=json.dumps(bodies),
                         capture_output=True, text=True, timeout=300, check=True)
    result: list[dict[str, object]] = json.loads(run.stdout)
    return result


def test_mermaid_parses_the_diagrams_as_written() -> None:
    _, zone = three_clusters()
    withdrawn = reweighted(zone.snapshot(), C_EU, 0)
    examples = [changed_splits(None, zone.snapshot(), NAMES)[0], changed_splits(zone.snapshot(), withdrawn, NAMES)[0]]
    hostile = [ALL_IN_ONE, *MERMAID, *MARKDOWN, "x\n```\n" + MARK, "a\"] --> n99[\"b",
               "x%%{init: {'securityLevel':'loose'}}%%"]
    for i, text in enumerate(hostile):
        (change,) = changed_splits(None, hostile_zone(f"h{i}{text}", text, f"t{i}{text}"), {"cluster-a-uid": text})
        examples.append(change)
    diagrams = [split_mermaid(c) for c in examples]
    for diagram, got in zip(diagrams, mermaid_parse(diagrams), strict=True):
        assert "error" not in got, (got, diagram)
        assert got["type"] == "flowchart-v2" and got["config"] == {}
        written = re.findall(r'(n\d+)\["([^"]*)"\]', diagram)
        subgraphs = [(i, shown(label)) for i, label in written if f"subgraph {i}[" in diagram]
        nodes = [(i, shown(label)) for i, label in written if f"subgraph {i}[" not in diagram]
        edges = [(a, b, shown(label)) for a, label, b in re.findall(r'(n\d+) -\.?->\|"([^"]*)"\| (n\d+)', diagram)]
        assert [(v, read(text)) for v, text in got["vertices"]] == nodes  # type: ignore[attr-defined]
        assert [(a, b, read(text)) for a, b, text in got["edges"]] == edges  # type: ignore[attr-defined]
        assert sorted((s, read(text)) for s, text, _ in got["subgraphs"]) == sorted(subgraphs)  # type: ignore[attr-defined]


def shown(label: str) -> str:
    """A label gitdns wrote as it reads (Mermaid trims a label's ends)."""
    return "\n".join(decoded(label)).strip()


def read(text: str) -> str:
    """A label as Mermaid's parser read it (HTML, ``<br>`` between lines)."""
    return "\n".join(html.unescape(part) for part in text.split("<br>")).strip()
