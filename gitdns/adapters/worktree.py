"""A git work tree holding the desired repository: read HEAD's files, commit one file on a new
branch without touching the checkout, push that branch (``gitdns groups``'s pull requests).

    open_worktree(repo) -> WorkTree       the work tree ``repo`` lies in (NotAWorkTree outside one)
    head_files(wt) -> {path: text}        the desired repository's YAML files as HEAD has them
    is_dirty(wt, path) / branch_exists(wt, branch)
    commit_on_branch(wt, path, content, branch, message, parent=HEAD) -> sha
    push_branch(wt, branch, auth=GitAuth(), timeout=) to ``origin``, with the git transport
                                          ``auth`` (`gitdns.adapters.git.auth`)

Local git failures raise WorkTreeError naming the git command and its message.  A failed push
raises the error `gitdns.adapters.git.errors` classifies (HostKeyMismatch, AuthenticationFailed,
TLSVerificationFailed, PushDeclined, ...), with the secrets taken out.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import git

from gitdns.adapters.git.auth import GitAuth, auth_env, check_url, redact
from gitdns.adapters.git.errors import git_error
from gitdns.adapters.status.cache import run_git as run_remote_git
from gitdns.errors import GitdnsError, PermanentError

PUSH_TIMEOUT = 120.0

YAML_SUFFIXES = (".yaml", ".yml")


class WorkTreeError(PermanentError):
    reason = "GitWorkTreeRefused"


class NotAWorkTree(WorkTreeError):
    """The path lies in no git work tree."""


@dataclass(slots=True)
class WorkTree:
    """The git work tree holding the desired repository at ``repo``."""

    handle: git.Repo
    root: Path  # the work tree root
    prefix: str  # the desired repository's path inside it (posix, "" at the root)

    def rel(self, repo_relative: str) -> str:
        return f"{self.prefix}/{repo_relative}" if self.prefix else repo_relative

    def origin_url(self) -> str | None:
        try:
            return str(self.handle.remotes["origin"].url)
        except (IndexError, KeyError, ValueError):
            return None


def open_worktree(repo: Path) -> WorkTree:
    try:
        handle = git.Repo(repo, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise NotAWorkTree(f"{repo} is not inside a git work tree") from None
    if handle.working_tree_dir is None:
        raise WorkTreeError(f"{repo}: a bare repository; give the path of a work tree")
    try:
        handle.head.commit  # noqa: B018 - a repository without commits has no HEAD to branch from
    except ValueError:
        raise WorkTreeError(f"{repo}: the repository has no commit yet") from None
    root = Path(handle.working_tree_dir).resolve()
    prefix = Path(repo).resolve().relative_to(root).as_posix()
    return WorkTree(handle, root, "" if prefix == "." else prefix)


def head_files(wt: WorkTree) -> dict[str, str]:
    """The YAML files of the desired repository as HEAD has them (as `read_tree` would list
    them from a checkout of HEAD)."""
    tree = wt.handle.head.commit.tree
    if wt.prefix:
        try:
            tree = tree[wt.prefix]
        except KeyError:
            return {}
    from gitdns.adapters.git.source import yaml_blobs

    return yaml_blobs(tree, wt.prefix)


def run_git(wt: WorkTree, *args: str, env: Mapping[str, str] | None = None) -> str:
    try:
        out: str = wt.handle.git.execute(["git", *args], env=dict(env or {}), with_extended_output=False,
                                         as_process=False, stdout_as_string=True)
    except git.GitCommandError as exc:
        raise WorkTreeError(f"git {args[0]} failed: {str(exc.stderr).strip() or exc}") from None
    return out.strip()


def is_dirty(wt: WorkTree, path: str) -> bool:
    return bool(run_git(wt, "status", "--porcelain", "--", path))


def branch_exists(wt: WorkTree, branch: str) -> bool:
    return bool(run_git(wt, "branch", "--list", branch))


def commit_on_branch(wt: WorkTree, path: str, content: str, branch: str, message: str,
                     parent: str | None = None) -> str:
    """Commit ``parent``'s tree (default HEAD's) with ``path`` set to ``content`` on the new
    ``branch``, with a temporary index: the checkout, the index and the current branch are not
    touched."""
    head = parent or wt.handle.head.commit.hexsha
    with tempfile.TemporaryDirectory(prefix="gitdns-groups-") as tmp:
        data = Path(tmp) / "blob"
        data.write_bytes(content.encode("utf-8"))
        blob = run_git(wt, "hash-object", "-w", "--no-filters", str(data))
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        run_git(wt, "read-tree", head, env=env)
        run_git(wt, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
        tree = run_git(wt, "write-tree", env=env)
    commit = run_git(wt, "commit-tree", tree, "-p", head, "-m", message)
    run_git(wt, "update-ref", "-m", "gitdns groups", f"refs/heads/{branch}", commit, "0" * 40)
    return commit


def push_branch(wt: WorkTree, branch: str, auth: GitAuth = GitAuth(),  # noqa: B008 - frozen value
                timeout: float = PUSH_TIMEOUT) -> None:
    """Push ``branch`` to ``origin`` (never forced) with the transport ``auth``: its key and
    known_hosts, its token (answered by an askpass helper from git's environment, never in
    argv, the URL or a file of ours; no credential helper is asked or told) and its CA; with
    nothing configured, the ambient git configuration, prompts off.  The whole git process
    group is killed after ``timeout``."""
    url = wt.origin_url() or "origin"
    helpers = ["-c", "credential.helper="] if auth.uses_token else []
    with tempfile.TemporaryDirectory(prefix="gitdns-push-") as tmp:
        secrets: tuple[str, ...] = ()
        try:
            if auth.configured:
                check_url(url)
            env, secrets = auth_env(auth, Path(tmp), timeout)
            out = run_remote_git([*helpers, "push", "origin", f"refs/heads/{branch}:refs/heads/{branch}"],
                                 cwd=wt.root, timeout=timeout, env=env)
        except GitdnsError as exc:
            raise _unpushed(exc, branch, secrets) from None
    if out.rc != 0:
        raise _unpushed(git_error("push", url, out.stderr, secrets), branch, secrets)


def _unpushed(exc: GitdnsError, branch: str, secrets: tuple[str, ...]) -> GitdnsError:
    """``exc`` (same type and reason) saying the branch stays committed locally."""
    message = (f"{redact(str(exc), secrets)}; the branch {branch} is committed locally: push it with "
               f"`git push origin {branch}` once the cause is fixed")
    return type(exc)(message, reason=exc.reason)
