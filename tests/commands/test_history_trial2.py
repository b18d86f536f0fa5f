"""`gitdns history` against what an auditor checks it with: a zone the agent held (status
--revision says held, history must not say applied), the by-value search over an invalid
commit, a concurrent commit compared with its own parent, clusters without a status branch,
--since/--until that git would read as nonsense, an uncreatable --state-dir, close names."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gitdns.commands import history as hist
from gitdns.commands import historyfmt as histfmt
from gitdns.core.statusdoc import dump
from tests.commands.test_history import HOST, IDS, Repo, git

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
