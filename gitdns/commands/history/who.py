"""Who made a change that reached the desired branch, as git records it: its author(s), the pull
request, and who merged it.  `gitdns history` and `gitdns groups log` name these for each
first-parent commit they list (`gitdns.commands.history.walk.Walk.commits`).

    attribute(commit, side, marks) -> Who    ``side``: the commits a merge brought in (`Walk.side_commits`),
                                             ``marks``: their signature marks (`Walk.marks`)
    attribute_all(walk, commits) -> {sha: (Who, mark)}   the side commits and marks read at once
    who_lines(who) -> [str]                  the text lines (through the text gate)
    who_dict(who) -> dict                    the JSON fields

The rules (docs/cli.md, "gitdns history"):

- **A merge commit** (more than one parent): the authors are those of the commits it brought in
  (``M^1..M^2``) that changed the desired YAML, oldest first (the merge's own author when none
  did: the change was made in the merge itself); the pull request is the one its message names
  (`Commit.pr`); it was merged by the merge commit's author (a forge commits it as itself, with
  the person who pressed "merge" as the author).
- **A commit naming a pull request** (a squash merge's subject ends in ``(#N)``; a forge's
  rewritten commit may say so too): the author is the commit's author; who merged it is not
  recorded in git, unless its committer is a person other than the author (a forge that commits
  as the person who merged, a maintainer who squashed by hand), then the committer, said so.
  A committer whose address is ``noreply@…`` (GitHub's ``noreply@github.com``) is the forge
  itself, not a person.
- **Any other commit**: the author is the commit's author; no pull request is named, so git
  cannot tell a direct push from a rebase merge (each rebased commit is a first-parent commit
  of its own, attributed to itself); nobody is named as having merged it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gitdns.commands.history.walk import Commit, Walk, iso_date
from gitdns.core.text import inline

SIDE_SHOWN = 10  # side commits listed per merge in text (JSON has them all)
NOT_RECORDED = "not recorded in git"
MARKS = {"G": "signed, verified", "B": "bad signature", "U": "signed, key not trusted",
         "X": "signed, signature expired", "Y": "signed, key expired", "R": "signed, key revoked",
         "E": "signed, cannot be checked (key unknown)", "N": "unsigned", "": "?"}


@dataclass(frozen=True, slots=True)
class Who:
    """The change of one first-parent commit: ``landed`` is ``merge`` (a merge commit),
    ``pr-commit`` (one commit naming a pull request: a squash merge) or ``direct`` (one naming
    none: a direct push, or a rebase merge's commit); ``merger`` "" when git does not record
    who merged (``merger_from``: ``merge commit author`` or ``committer``)."""

    commit: Commit
    authors: tuple[str, ...]
    pr: int | None
    landed: str
    merger: str = ""
    merger_from: str = ""
    side: tuple[tuple[Commit, str], ...] = ()  # a merge's commits that changed the YAML (oldest first), with
    # their signature marks (git's %G?)


def _forge(ident: str) -> bool:
    """A committer that is a forge's own account (``noreply@github.com``), not a person."""
    email = ident.rpartition("<")[2].rstrip(">").strip().lower()
    return email.split("@", 1)[0] in ("noreply", "no-reply")


def attribute(commit: Commit, side: Sequence[Commit] = (), marks: Mapping[str, str] | None = None) -> Who:
    """Who made ``commit``'s change (a first-parent commit of the desired branch), by the rules
    of the module docstring; ``side``: the commits a merge brought in that changed the YAML,
    ``marks`` their signature marks."""
    pr = commit.pr
    if commit.is_merge:
        authors = tuple(dict.fromkeys(c.author for c in side)) or (commit.author,)
        brought = tuple((c, (marks or {}).get(c.sha, "")) for c in side)
        return Who(commit, authors, pr, "merge", commit.author, "merge commit author", brought)
    if pr is None:
        return Who(commit, (commit.author,), None, "direct")
    person = commit.committer and commit.committer != commit.author and not _forge(commit.committer)
    return Who(commit, (commit.author,), pr, "pr-commit", commit.committer if person else "",
               "committer" if person else "")


def attribute_all(walk: Walk, commits: Sequence[Commit]) -> dict[str, tuple[Who, str]]:
    """Each commit's `Who` and signature mark: the side commits of every merge among them in
    one ``git log`` (`Walk.side_commits`), the marks of all in one more (`Walk.marks`)."""
    side = walk.side_commits(commits)
    marks = walk.marks([*(c.sha for c in commits), *(s.sha for cs in side.values() for s in cs)])
    return {c.sha: (attribute(c, side.get(c.sha, ()), marks), marks.get(c.sha, "")) for c in commits}


def _committed(c: Commit) -> str:
    return f" (committed by {c.committer})" if c.committer and c.committer != c.author else ""


def who_lines(who: Who) -> list[str]:
    """``author: …; PR #N; merged by …`` and, for a merge, one line per commit it brought in
    (the first `SIDE_SHOWN`), each with its signature mark."""
    c = who.commit
    authors = ", ".join(who.authors)
    if who.landed == "merge":
        pr = f"PR #{who.pr}" if who.pr is not None else "no pull request named in the merge's message"
        head = f"author: {authors}; {pr}; merged by {who.merger}{_committed(c)}"
    elif who.landed == "pr-commit":
        merged = f"merged by {who.merger} (its committer)" if who.merger else f"merged by: {NOT_RECORDED}"
        head = f"author: {authors}{_committed(c)}; PR #{who.pr} (a squash or rebase merge); {merged}"
    else:
        head = (f"author: {authors}{_committed(c)}; no pull request named in git (a direct push, or a rebase "
                "merge)")
    lines = [inline(head)]
    for s, mark in who.side[:SIDE_SHOWN]:
        lines.append(inline(f"commit {s.sha[:7]}  {iso_date(s.author_time)}  {s.author}  "
                            f"[{MARKS.get(mark, mark)}]  {s.subject}"))
    if len(who.side) > SIDE_SHOWN:
        rest = len(who.side) - SIDE_SHOWN
        lines.append(f"and {rest} more commit(s): git log {c.sha[:7]}^1..{c.sha[:7]}")
    return lines


def who_dict(who: Who | None) -> dict[str, Any]:
    """``authors``, ``pr``, ``landed``, ``mergedBy``, ``mergedByFrom`` and the side commits
    (``brought``: sha, author, authorDate, signature, subject)."""
    if who is None:
        return {"authors": [], "pr": None, "landed": None, "mergedBy": None, "mergedByFrom": None, "brought": []}
    return {"authors": list(who.authors), "pr": who.pr, "landed": who.landed, "mergedBy": who.merger or None,
            "mergedByFrom": who.merger_from or None,
            "brought": [{"sha": s.sha, "author": s.author, "authorDate": iso_date(s.author_time),
                         "signature": mark or None, "subject": s.subject} for s, mark in who.side]}
