"""`gitdns history` against what an auditor checks it with: a zone the agent held (status
--revision says held, history must not say applied), the by-value search over an invalid
commit, a concurrent commit compared with its own parent, clusters without a status branch,
--since/--until that git would read as nonsense, an uncreatable --state-dir, close names."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from gitdns.cli import main
from gitdns.commands.history import fmt as histfmt
from gitdns.commands.history import trace as hist
from gitdns.commands.history.diff import iso_date
from gitdns.core.status.doc import dump
from gitdns.errors import ConfigError
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


def test_a_concurrent_commit_is_attributed_to_its_merge_compared_with_its_first_parent(tmp_path: Path) -> None:
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
    assert side not in weights  # 210 never reached main: the change on the branch is its merge's
    assert changed(merge, 220, 230), weights[merge]  # on the branch: from its first parent
    entry = next(e for e in result.entries if e.commit.sha == merge)
    assert entry.who is not None and entry.who.authors == ("Frank <frank@example.com>",)
    assert (entry.who.pr, entry.who.landed, entry.who.merger) == (16, "merge", "Carol <carol@example.com>")
    assert [c.sha for c, _ in entry.who.side] == [side]
    assert [e.commit.sha for e in result.entries] == [initial, direct, merge]


AP_SOUTH = """\
apiVersion: gitdns.io/v1alpha1
kind: Cluster
metadata:
  name: ap-south-1
spec:
  id: 11111111-2222-4333-8444-555555555555
  geo: US
  group: site-b
  gateways:
    - name: api-gw
      namespace: ingress
      addresses: [198.51.100.77]
      listeners:
        - hostname: api.example.com
"""


def _published(tmp_path: Path) -> tuple[Repo, str]:
    """The repository's first commit, applied by every cluster of ``IDS``."""
    r = Repo(tmp_path)
    initial = r.commit("Alice", "initial desired state")
    for i, cluster in enumerate(sorted(IDS)):
        _status(r, cluster, initial, "", EPOCH + 1800 + i)
    return r, initial


def test_a_cluster_without_a_status_branch_is_listed_and_no_status_branch_at_all_is_said(tmp_path: Path) -> None:
    r, _ = _published(tmp_path)
    r.write("clusters/ap-south-1.yaml", AP_SOUTH)
    added = r.commit("Alice", "ap-south-1")
    result = hist.history("198.51.100.77", str(r.bare), state_dir=tmp_path / "state")
    entry = next(e for e in result.entries if e.commit.sha == added)
    assert [(a.cluster, a.branch) for a in entry.applied] == [
        ("ap-south-1", False), ("eu-central-1", True), ("eu-west-1", True), ("us-east-1", True)]
    text = histfmt.to_text(result)
    assert "  ap-south-1: not applied yet (no status branch)" in text, text
    assert json.loads(histfmt.to_json(result))["entries"][0]["applied"][0]["statusBranch"] is False
    # a clone of the desired branch alone: no status branch at all is said, with the fetch that brings them
    clone = tmp_path / "c3"
    git("clone", "-q", "--single-branch", "-b", "main", str(r.bare), str(clone), cwd=tmp_path)
    alone = hist.history(HOST, str(clone), state_dir=tmp_path / "state2")
    assert alone.status_branches == 0
    fetch = "git fetch origin 'refs/heads/gitdns-status/*:refs/remotes/origin/gitdns-status/*'"
    assert any(h.startswith(f"no gitdns-status/* branches in {clone}; fetch them ({fetch})") for h in alone.hints), \
        alone.hints
    assert "hint: no gitdns-status/* branches" in histfmt.to_text(alone)


def test_a_state_dir_that_cannot_be_created_is_a_config_error(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    r = Repo(tmp_path)
    r.commit("Alice", "initial desired state")
    afile = tmp_path / "afile"
    afile.write_text("")
    with pytest.raises(ConfigError, match=r"--state-dir .*afile: .*afile/history cannot be created: Not a directory"):
        hist.history(HOST, str(r.bare), state_dir=afile)
    for command in ("history", "status"):
        args = [command, *([HOST] if command == "history" else []), "--repo", str(r.bare), "--state-dir", str(afile)]
        assert main(args) == 1
        err = capsys.readouterr().err
        assert f"gitdns: --state-dir {afile}: " in err and "Not a directory" in err and "Traceback" not in err, err


@pytest.mark.parametrize(("flag", "value", "says"), [
    ("--since", "garbage", "--since garbage: git reads no date in it"),
    ("--since", "2024-13-45", "--since 2024-13-45: 2024-13-45 is not a date"),
    ("--since", "", "--since is empty"),
    ("--until", "2024-02-30T10:00:00Z", "--until 2024-02-30T10:00:00Z: 2024-02-30 is not a date"),
    ("--until", "next blursday", "--until next blursday: git reads no date in it"),
])
def test_a_date_git_would_read_as_nonsense_is_refused(flag: str, value: str, says: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    r = Repo(tmp_path)
    r.commit("Alice", "initial desired state")
    assert main(["history", HOST, "--repo", str(r.bare), flag, value]) == 1
    err = capsys.readouterr().err
    assert says in err and "(reason: InvalidConfiguration)" in err, err
    for good in ("2023-11-14", "2023-11-14T22:00:00Z", "2 weeks ago", "yesterday", "now"):
        assert main(["history", HOST, "--repo", str(r.bare), flag, good]) == 0, capsys.readouterr().err
    capsys.readouterr()


def test_a_typo_under_a_zone_gets_the_close_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = Repo(tmp_path)
    r.commit("Alice", "initial desired state")
    assert main(["history", "apii.example.com", "--repo", str(r.bare)]) == 0
    out = capsys.readouterr().out
    assert "no commit changed the desired records of apii.example.com" in out
    assert "hint: no record of zone example.com is named apii.example.com at " in out
    assert out.rstrip().endswith("close names: api.example.com (a typo?)"), out
    assert main(["history", "zzz.example.com", "--repo", str(r.bare)]) == 0
    out = capsys.readouterr().out
    assert "hint: no record of zone example.com is named zzz.example.com at " in out and "close names" not in out
    assert main(["history", HOST, "--repo", str(r.bare)]) == 0
    assert "hint: no record" not in capsys.readouterr().out


def test_a_bad_path_or_branch_is_blamed_on_the_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    r = Repo(tmp_path)
    r.commit("Alice", "initial desired state")
    cases = [(["--path", "../x"], "--path ../x: a directory inside the repository is wanted"),
             (["--branch", ""], "--branch is empty"),
             (["--branch", "a..b"], "--branch a..b: not a branch name git accepts"),
             (["--branch", "mian"], f"--branch mian: branch mian does not exist on {r.bare} (its branches: main)")]
    for args, says in cases:
        assert main(["history", HOST, "--repo", str(r.bare), *args]) == 1
        err = capsys.readouterr().err
        assert says in err and "(reason: InvalidConfiguration)" in err, err
    # through a URL too (the branches listed by git ls-remote)
    assert main(["history", HOST, "--repo", f"file://{r.bare}", "--branch", "mian"]) == 1
    assert "--branch mian: branch mian does not exist on file://" in capsys.readouterr().err


def test_the_header_counts_invalid_commits_apart(held: tuple[Repo, dict[str, str]], tmp_path: Path) -> None:
    r, _ = held
    first = histfmt.to_text(hist.history(MAIL, str(r.bare), state_dir=tmp_path)).splitlines()[0]
    assert first.startswith(f"history of name {MAIL}: 2 change(s) and 1 invalid commit(s) in 3 commit(s)"), first


def test_a_cluster_that_left_is_said_so_once(tmp_path: Path) -> None:
    r, _ = _published(tmp_path)
    r.write("clusters/eu-central-1.yaml", None)
    retire = r.commit("Dave", "retire eu-central-1")
    later = []
    for weight in (230, 240, 250):
        r.write(API, r.read(API).replace(f"weight: {weight - 10 if weight > 230 else 200}", f"weight: {weight}"))
        later.append(r.commit("Eve", f"api: {weight}"))
    result = hist.history(HOST, str(r.bare), state_dir=tmp_path / "state")
    said = {e.commit.sha: {a.cluster: a for a in e.applied} for e in result.entries}
    assert said[retire]["eu-central-1"].in_git  # its own removal: it never applied it
    assert not said[later[0]]["eu-central-1"].in_git
    assert "eu-central-1" not in said[later[1]] and "eu-central-1" not in said[later[2]], said[later[1]]
    assert histfmt.to_text(result).count("eu-central-1: not in git at this revision") == 1
