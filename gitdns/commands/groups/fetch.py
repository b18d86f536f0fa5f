"""Fetch before judging: ``groups get|add|remove|set|reconcile`` bring ``origin``'s desired
branch (and its ``gitdns/groups-*`` branches) into the work tree's remote-tracking refs first,
then read the ActiveGroups of ``origin/<branch>``, not of a possibly stale checkout (the
checkout's HEAD when it contains ``origin/<branch>``: local commits on top are kept).

    fetch_desired(wt, auth) -> Fetched    base commit, its files, and a note when not fetched
    free_branch(wt, name) -> str          ``name``, or ``name-2``, ``name-3``... : a branch
                                          name neither the work tree nor origin has used
    head_at(wt, sha) -> HeadInfo

The desired branch is the one `committed.desired_branch` names (GITDNS_BRANCH, else origin's
default, else main).  Without a remote named ``origin`` the checkout's HEAD is the base; a
failed fetch refuses the change (`GroupsRefused`, with git's classified reason) and makes
``get`` say its answer is from the local checkout.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from gitdns.adapters.git.auth import GitAuth, auth_env, check_url, redact
from gitdns.adapters.git.errors import git_error
from gitdns.adapters.status.cache import run_git as run_remote_git
from gitdns.adapters.worktree import WorkTree, run_git
from gitdns.commands.committed import desired_branch
from gitdns.core.desired import HeadInfo
from gitdns.core.model import Revision
from gitdns.errors import GitdnsError

FETCH_TIMEOUT = 60.0
BRANCH_PREFIX = "gitdns/groups-"


@dataclass(frozen=True, slots=True)
class Fetched:
    sha: str  # the base commit: origin/<branch>; HEAD when it contains origin/<branch>, without origin,
    # or when origin was not fetched
    ref: str  # how it is named: "origin/main", "HEAD"
    files: dict[str, str]  # the desired repository's YAML files at sha
    error: GitdnsError | None = None  # the fetch failed (then sha is HEAD's)


def _fetch(wt: WorkTree, branch: str, auth: GitAuth) -> None:
    url = wt.origin_url() or "origin"
    helpers = ["-c", "credential.helper="] if auth.uses_token else []
    refspecs = [f"+refs/heads/{branch}:refs/remotes/origin/{branch}",
                f"+refs/heads/{BRANCH_PREFIX}*:refs/remotes/origin/{BRANCH_PREFIX}*"]
    with tempfile.TemporaryDirectory(prefix="gitdns-fetch-") as tmp:
        secrets: tuple[str, ...] = ()
        try:
            if auth.configured:
                check_url(url)
            env, secrets = auth_env(auth, Path(tmp), FETCH_TIMEOUT)
            out = run_remote_git([*helpers, "fetch", "--quiet", "--no-tags", "origin", *refspecs], cwd=wt.root,
                                 timeout=FETCH_TIMEOUT, env=env)
        except GitdnsError as exc:
            raise type(exc)(redact(str(exc), secrets), reason=exc.reason) from None
    if out.rc != 0:
        raise git_error("fetch", url, out.stderr, secrets)


def fetch_desired(wt: WorkTree, auth: GitAuth) -> Fetched:
    """Fetch origin's desired branch; the base commit to read and to branch from."""
    from gitdns.adapters.git.rev import files_at

    head = wt.handle.head.commit.hexsha
    root = wt.root / wt.prefix if wt.prefix else wt.root
    if wt.origin_url() is None:
        return Fetched(head, "HEAD", files_at(root, head) or {})
    branch = desired_branch(wt.root, os.environ)
    try:
        _fetch(wt, branch, auth)
    except GitdnsError as exc:
        return Fetched(head, "HEAD", files_at(root, head) or {}, error=exc)
    ref = f"origin/{branch}"
    try:
        sha = run_git(wt, "rev-parse", "--verify", "--quiet", f"refs/remotes/{ref}^{{commit}}")
    except GitdnsError:  # origin has no such branch (a new repository): the checkout is all there is
        return Fetched(head, "HEAD", files_at(root, head) or {})
    try:  # a checkout that contains origin's branch (local commits on top) is not stale: it is the base
        run_git(wt, "merge-base", "--is-ancestor", sha, head)
    except GitdnsError:
        return Fetched(sha, ref, files_at(root, sha) or {})
    return Fetched(head, "HEAD" if head == sha else f"HEAD (on top of {ref})", files_at(root, head) or {})


def _used(wt: WorkTree, name: str) -> bool:
    return bool(run_git(wt, "for-each-ref", "--count=1", f"refs/heads/{name}", f"refs/remotes/origin/{name}"))


def free_branch(wt: WorkTree, name: str) -> str:
    """``name``, or the first of ``name-2``, ``name-3``, ... no local or origin branch has."""
    candidate, n = name, 1
    while _used(wt, candidate):
        n += 1
        candidate = f"{name}-{n}"
    return candidate


def head_at(wt: WorkTree, sha: str) -> HeadInfo:
    """The revision, message and author of commit ``sha``."""
    commit = wt.handle.commit(sha)
    message = commit.message if isinstance(commit.message, str) else commit.message.decode("utf-8", "replace")
    return HeadInfo(Revision(int(commit.committed_date), commit.hexsha), message, str(commit.author))
