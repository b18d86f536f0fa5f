"""`gitdns history` against what an auditor checks it with: a zone the agent held (status
--revision says held, history must not say applied), the by-value search over an invalid
commit, a concurrent commit compared with its own parent, clusters without a status branch,
--since/--until that git would read as nonsense, an uncreatable --state-dir, close names."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from gitdns.commands import history as hist
from gitdns.commands import historyfmt as histfmt
from gitdns.commands.historydiff import iso_date
from gitdns.core.statusdoc import dump
from tests.commands.test_history import EPOCH, HOST, IDS, Repo, git

API = "policies/api.yaml"
MAIL_FILE = "records/example-com.yaml"
MAIL = "mail.example.com"


def _status(repo: Repo, cluster: str, applied: str, parent: str, when: int,
            held: dict[str, tuple[str, str]] | None = None) -> str:
    """A status-branch commit as the agent writes it: summary.yaml, health.yaml and a zone
    document per zone (``held``: zone -> (last good revision, problem) for the zones it holds)."""
    cid = IDS[cluster]
    files = {"summary.yaml": dump({"cluster": cluster, "clusterId": cid, "appliedRevision": applied}),
             "health.yaml": dump({"targets": {}})}
    for zone in ("example.com", "example.org"):
        last_good, problem = (held or {}).get(zone, (f"{when}.{applied[:7]}", ""))
        files[f"zones/{zone}.yaml"] = dump({"zone": zone, "provider": "local", "held": zone in (held or {}),
                                            "problems": [problem] if problem else [], "appliedRevision": last_good,
                                            "owned": [], "error": None})
    zones = []
    for rel, text in files.items():
        path = repo.work.parent / f"blob-{when}-{rel.replace('/', '-')}"
        path.write_text(text)
        blob = git("hash-object", "-w", str(path), cwd=repo.bare)
        if rel.startswith("zones/"):
            zones.append(f"100644 blob {blob}\t{rel[len('zones/'):]}")
        else:
            files[rel] = blob
    sub = _mktree(repo, "\n".join(zones) + "\n")
    listing = [f"100644 blob {files[r]}\t{r}" for r in ("health.yaml", "summary.yaml")] + [f"040000 tree {sub}\tzones"]
    tree = _mktree(repo, "\n".join(listing) + "\n")
    env = {"GIT_AUTHOR_NAME": "gitdns", "GIT_AUTHOR_EMAIL": "gitdns@localhost", "GIT_COMMITTER_NAME": "gitdns",
           "GIT_COMMITTER_EMAIL": "gitdns@localhost", "GIT_AUTHOR_DATE": f"@{when} +0000",
           "GIT_COMMITTER_DATE": f"@{when} +0000"}
    sha = git("commit-tree", tree, "-m", f"status({cluster}): {applied[:7]}", *(["-p", parent] if parent else []),
              cwd=repo.bare, env=env)
    git("update-ref", f"refs/heads/gitdns-status/{cid}", sha, cwd=repo.bare)
    return sha


def _mktree(repo: Repo, listing: str) -> str:
    return subprocess.run(["git", "mktree"], cwd=repo.bare, input=listing, capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture(scope="module")
def held(tmp_path_factory: pytest.TempPathFactory) -> tuple[Repo, dict[str, str]]:
    """initial (1h), every cluster applies it; mail moves to .26 (2h); an out-of-range weight
    (3h) that holds example.com; us-east-1 applies the head (10h) holding example.com at the
    initial revision; the weight fixed (4h), us-east-1 applies it (20h), nothing held."""
    r = Repo(tmp_path_factory.mktemp("held"))
    shas = {"initial": r.commit("Alice", "initial desired state")}
    r.write(MAIL_FILE, r.read(MAIL_FILE).replace("values: [192.0.2.25]", "values: [192.0.2.26]"))
    shas["mail"] = r.commit("Alice", "mail moves to .26")
    good = r.read(API)
    r.write(API, good.replace("weight: 200", "weight: 301"))
    shas["oops"] = r.commit("Alice", "api: 301 (oops)")
    first = {c: _status(r, c, shas["initial"], "", EPOCH + 1800 + i) for i, c in enumerate(sorted(IDS))}
    problem = "policies/api.yaml:19: weight 301 is out of range"
    shas["held"] = _status(r, "us-east-1", shas["oops"], first["us-east-1"], EPOCH + 10 * 3600,
                           {"example.com": (f"{EPOCH + 3600}.{shas['initial'][:7]}", problem)})
    return r, shas


def _by_cluster(entry: object) -> dict[str, object]:
    return {a.cluster: a for a in entry.applied}  # type: ignore[attr-defined]


def test_a_change_in_a_zone_the_cluster_held_is_not_applied(held: tuple[Repo, dict[str, str]],
                                                            tmp_path: Path) -> None:
    r, shas = held
    result = hist.history(MAIL, str(r.bare), state_dir=tmp_path)
    mail = next(e for e in result.entries if e.commit.sha == shas["mail"])
    us = _by_cluster(mail)["us-east-1"]
    assert not us.at and us.held_since == EPOCH + 10 * 3600, us  # type: ignore[attr-defined]
    text = histfmt.to_text(result)
    assert f"us-east-1: held {iso_date(EPOCH + 10 * 3600)}: zone example.com stays at {shas['initial'][:7]}" \
        in text, text
    assert "us-east-1: applied" not in text.split(shas["mail"][:7], 1)[1].split("\n\n", 1)[0]
    doc = json.loads(histfmt.to_json(result))
    row = next(a for e in doc["entries"] if e["sha"] == shas["mail"] for a in e["applied"]
               if a["cluster"] == "us-east-1")
    assert row["at"] is None and row["held"] == {"since": iso_date(EPOCH + 10 * 3600), "zone": "example.com",
                                                 "lastGood": shas["initial"][:7],
                                                 "reason": "policies/api.yaml:19: weight 301 is out of range"}
    # the fix, applied with nothing held: the change is applied, as part of the fix
    r.write(API, r.read(API).replace("weight: 301", "weight: 250"))
    fix = r.commit("Alice", "api: 250")
    try:
        _status(r, "us-east-1", fix, shas["held"], EPOCH + 20 * 3600)
        again = hist.history(MAIL, str(r.bare), state_dir=tmp_path)
        us = _by_cluster(next(e for e in again.entries if e.commit.sha == shas["mail"]))["us-east-1"]
        assert us.at == EPOCH + 20 * 3600 and us.revision == fix and not us.held_since  # type: ignore[attr-defined]
    finally:
        git("push", "-q", "--force", str(r.bare), f"{shas['oops']}:refs/heads/main", cwd=r.work)
        git("reset", "-q", "--hard", shas["oops"], cwd=r.work)
        git("update-ref", f"refs/heads/gitdns-status/{IDS['us-east-1']}", shas["held"], cwd=r.bare)


def test_a_value_search_reports_an_invalid_commit_rather_than_a_removal(held: tuple[Repo, dict[str, str]],
                                                                        tmp_path: Path) -> None:
    r, shas = held
    result = hist.history("192.0.2.26", str(r.bare), state_dir=tmp_path)
    by = {e.commit.sha: e for e in result.entries}
    assert by[shas["mail"]].status == "changed" and [c.op for c in by[shas["mail"]].changes] == ["~"]
    oops = by[shas["oops"]]
    assert oops.status == "invalid" and oops.zone == "example.com" and not oops.changes, oops
    text = histfmt.to_text(result)
    assert f"- {MAIL}" not in text, text
    assert "invalid: 1 problem(s) hold zone example.com" in text
    doc = json.loads(histfmt.to_json(result))
    assert {e["sha"]: e["zone"] for e in doc["entries"]}[shas["mail"]] == "example.com"


def test_a_concurrent_commit_is_compared_with_its_own_parent(tmp_path: Path) -> None:
    r = Repo(tmp_path)
    initial = r.commit("Alice", "initial desired state")
    git("checkout", "-q", "-b", "frank/w210", cwd=r.work)
    r.write(API, r.read(API).replace("weight: 200", "weight: 210"))
    side = r.commit("Frank", "api: 210")  # Repo.commit pushes to main: main is put back
    git("push", "-q", "--force", str(r.bare), f"{initial}:refs/heads/main", cwd=r.work)
    git("checkout", "-q", "main", cwd=r.work)
    r.write(API, r.read(API).replace("weight: 200", "weight: 220"))
    direct = r.commit("Alice", "api: 220 (direct push)")
    who = {"GIT_COMMITTER_NAME": "Carol", "GIT_COMMITTER_EMAIL": "carol@example.com"}
    git("merge", "-q", "--no-ff", "--no-commit", "-s", "ours", "frank/w210", cwd=r.work, env=who)
    r.write(API, r.read(API).replace("weight: 220", "weight: 230"))
    merge = r.commit("Carol", "Merge pull request #16 from frank/w210")
    result = hist.history(f"us.klb.{HOST}", str(r.bare), state_dir=tmp_path / "state")
    weights = {e.commit.sha: [histfmt.change_line(c) for c in e.changes] for e in result.entries}

    def changed(sha: str, old: int, new: int) -> bool:
        return any(f"weight={old} [" in line and f"-> ttl=60 weight={new} [" in line for line in weights[sha])

    assert changed(direct, 200, 220), weights[direct]  # its author never saw 210
    assert changed(side, 200, 210), weights[side]
    assert changed(merge, 220, 230), weights[merge]  # on the branch: from its first parent
