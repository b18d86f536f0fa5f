"""The repository of docs/audit.md ("Audit a DNS change"), built as its history says it was.

``example-repo/`` (its DNSPolicies without health checks: the example's gateways have
documentation addresses, which no test may probe) in a bare repository ``dns.git``, changed by
people through pull requests merged on a forge, and applied by three real agents
(``gitdns agent --once``, the embedded ``local`` store shared through ``--store-dir``), each run
at a pinned time (git's ``GIT_COMMITTER_DATE``: the status commit's date is the time the agent
pushed):

====================  ====================================================================
2024-05-06 09:00      Alice commits the initial desired state; the three agents apply it
2024-05-07 10:00      Bob (signed) raises the GCP clusters' weight to 250 on bob/gcp-weight
2024-05-07 12:00      Carol merges it as pull request #12 (merge commit by GitHub, signed;
                      ``Reviewed-by: Dave``); eu-west-1 and us-east-1 apply it at 12:05 and
                      12:06, eu-central-1 at 14:30
2024-05-08 09:00      us-east-1 reports 203.0.113.10 unhealthy and withdraws it; restored at
                      09:25
2024-05-09 09:00      Dave runs ``gitdns groups set example-com site-b`` (the failover);
                      Carol merges it as #13 at 09:10 (``Approved-by: Erin``); the agents
                      apply it from 09:15
2024-05-11 09:00      Erin removes Cluster eu-central-1; Carol merges it as #14 at 10:00;
                      eu-central-1's agent applies the removal at 10:10, us-east-1 at 10:11;
                      eu-west-1 never ran again (pending)
====================  ====================================================================

Every commit is made with the identities and dates above, so only the signatures (made now,
with throwaway keys) make the shas differ from run to run.  The health withdrawal is the one
status commit an agent does not write here: a one-shot agent cannot withdraw (its probes need a
running agent past the grace period of a new revision, docs/health.md), so that commit is
published through the agent's own publishing path (`StatusBranch.publish`, the agent's commit
message) from the agent's last tree, with the ``health.yaml`` and the ``Healthy`` condition a
running agent writes when it withdraws a target.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from gitdns import __version__
from gitdns.adapters.status.branch import StatusBranch
from gitdns.core.status.doc import commit_message, dump, load
from tests.adapters.conftest import GpgKeys
from tests.docs.examples import EXAMPLE_REPO, ROOT, at, git
from tests.e2e.agent_kit import agent_once_at, drop_health_checks

T0 = 1_714_986_000  # 2024-05-06T09:00:00Z
HOUR, DAY = 3600, 86400
IDS = {"eu-west-1": "3f6c2b9e-5a1d-4c7e-9b0a-2d8e4f1a7c63", "eu-central-1": "8a1e47d2-0c3b-4f95-a6d8-71b2c9e05f34",
       "us-east-1": "c5d09a7f-2e64-4b18-8f3c-96a0e1d4b275"}
UNHEALTHY = "api.example.com|203.0.113.10"  # a target of us-east-1
HEALTHY = "api.example.com|2001:db8::10"  # its other one


def person(name: str, email: str | None = None, committer: tuple[str, str] | None = None) -> dict[str, str]:
    mail = email or f"{name.lower()}@example.com"
    cname, cmail = committer or (name, mail)
    return {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": mail, "GIT_COMMITTER_NAME": cname,
            "GIT_COMMITTER_EMAIL": cmail}


GITHUB = ("GitHub", "noreply@github.com")


class Keys(GpgKeys):
    """Throwaway OpenPGP keys (tests/adapters/conftest.py's), with any user id."""

    def generate_uid(self, name: str, email: str) -> str:
        spec = ("%no-protection\nKey-Type: eddsa\nKey-Curve: ed25519\n"
                f"Name-Real: {name}\nName-Email: {email}\nExpire-Date: 0\n%commit\n")
        self._gpg("--batch", "--gen-key", stdin=spec)
        listing = self._gpg("--with-colons", "--list-keys", f"<{email}>")
        return next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))


class AuditRepo:
    def __init__(self, root: Path, keys: Keys) -> None:
        self.root = root
        self.bare = root / "dns.git"
        self.work = root / "work"
        self.keys = keys
        self.signing = {"Bob": keys.generate_uid("Bob", "bob@example.com"), "GitHub": keys.generate_uid(*GITHUB)}
        self.shas: dict[str, str] = {}

    # -- git, as people and the forge use it --------------------------------------------------

    def _git(self, *args: str, who: dict[str, str] | None = None, when: int | None = None,
             sign: str | None = None) -> str:
        options = [a for o in (self.keys.sign(self.signing[sign]) if sign else []) for a in ("-c", o)]
        env = {**self.keys.env, **(who or {}), **(at(when) if when is not None else {})}
        return git(*options, *args, cwd=self.work, env=env)

    def commit(self, who: dict[str, str], when: int, message: str, sign: str | None = None) -> str:
        self._git("add", "-A")
        self._git("commit", "-q", *(["-S"] if sign else []), "-m", message, who=who, when=when, sign=sign)
        return self._git("rev-parse", "HEAD")

    def merge_pr(self, number: int, branch: str, title: str, trailer: str, when: int) -> str:
        """Merged as a forge merges: ``Merge pull request #N from BRANCH``, the PR's title and the
        team's trailer, authored by Carol, committed and signed by GitHub."""
        self._git("push", "-q", "origin", branch)
        self._git("checkout", "-q", "main")
        self._git("merge", "-q", "--no-ff", "-S", "-m", f"Merge pull request #{number} from {branch}", "-m", title,
                  "-m", trailer, branch, who=person("Carol", committer=GITHUB), when=when, sign="GitHub")
        self._git("push", "-q", "origin", "main")
        return self._git("rev-parse", "HEAD")

    # -- the agents ---------------------------------------------------------------------------

    def agent(self, cluster: str, when: int) -> None:
        """One ``gitdns agent --once`` of ``cluster``, its status pushed at ``when``."""
        done = agent_once_at(self.bare, cluster, self.root / "agents" / cluster, self.work, at(when), timeout=120)
        assert done.returncode == 0, f"agent {cluster}: {done.stdout}{done.stderr[-3000:]}"

    def health(self, cluster: str, when: int, unhealthy: bool) -> None:
        """A status commit withdrawing (or restoring) UNHEALTHY, published as the agent publishes."""
        branch = f"gitdns-status/{IDS[cluster]}"
        listing = git("ls-tree", "-r", "--name-only", branch, cwd=self.bare).split()
        files = {path: git("show", f"{branch}:{path}", cwd=self.bare) + "\n" for path in listing}
        summary = load(files["summary.yaml"])
        healthy = ({"type": "Healthy", "status": "False", "reason": "TargetsWithdrawn",
                    "message": f"unhealthy, withdrawn: {UNHEALTHY.replace('|', ' ')}"} if unhealthy else
                   {"type": "Healthy", "status": "True", "reason": "TargetsHealthy",
                    "message": "every probed target is healthy"})
        summary["conditions"] = [healthy if c.get("type") == "Healthy" else c for c in summary["conditions"]]
        files["summary.yaml"] = dump(summary)
        state = {"state": "unhealthy", "error": "connection refused"} if unhealthy else {"state": "healthy"}
        files["health.yaml"] = dump({"targets": {UNHEALTHY: state, HEALTHY: {"state": "healthy"}}})
        applied = str(summary["appliedRevision"])
        message = commit_message(cluster, True, applied[:7], f"{sum(p.startswith('zones/') for p in files)} zone(s)",
                                 {"Desired-Revision": applied, "Agent": f"gitdns/{__version__}"})
        with _pinned(when):
            assert StatusBranch(str(self.bare), IDS[cluster], workdir=self.root / "publish" / cluster).publish(
                files, message)

    # -- the story ----------------------------------------------------------------------------

    def build(self) -> dict[str, str]:
        git("init", "-q", "--bare", "-b", "main", str(self.bare), cwd=self.root)
        shutil.copytree(EXAMPLE_REPO, self.work, ignore=shutil.ignore_patterns(".gitdns"))
        drop_health_checks(self.work)
        (self.work / ".gitignore").write_text(".gitdns/\n", encoding="utf-8")
        git("init", "-q", "-b", "main", cwd=self.work)
        git("remote", "add", "origin", str(self.bare), cwd=self.work)
        s = self.shas
        s["initial"] = self.commit(person("Alice"), T0, "initial desired state")
        self._git("push", "-q", "origin", "main")
        for n, cluster in enumerate(IDS):
            self.agent(cluster, T0 + 15 * 60 + n * 60)

        # pull request #12: a weight
        self._git("checkout", "-q", "-b", "bob/gcp-weight")
        api = self.work / "policies" / "api.yaml"
        api.write_text(api.read_text(encoding="utf-8").replace("weight: 200", "weight: 250"), encoding="utf-8")
        s["weight"] = self.commit(person("Bob"), T0 + DAY + HOUR, "api: GCP clusters take 250 shares", sign="Bob")
        s["merge-weight"] = self.merge_pr(12, "bob/gcp-weight", "api: GCP clusters take 250 shares",
                                          "Reviewed-by: Dave <dave@example.com>", T0 + DAY + 3 * HOUR)
        self.agent("eu-west-1", T0 + DAY + 3 * HOUR + 5 * 60)
        self.agent("us-east-1", T0 + DAY + 3 * HOUR + 6 * 60)
        self.agent("eu-central-1", T0 + DAY + 5 * HOUR + 30 * 60)

        # a health withdrawal on us-east-1's status branch
        self.health("us-east-1", T0 + 2 * DAY, unhealthy=True)
        self.health("us-east-1", T0 + 2 * DAY + 25 * 60, unhealthy=False)

        # pull request #13: the failover, made with gitdns groups set
        out = subprocess.run(
            [sys.executable, "-m", "gitdns.cli", "groups", "set", "example-com", "site-b", "--repo", str(self.work)],
            cwd=self.work, env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
                                "PYTHONPATH": str(ROOT), **person("Dave"), **at(T0 + 3 * DAY)},
            capture_output=True, text=True, timeout=120, check=False)
        assert out.returncode == 0, f"groups set: {out.stdout}{out.stderr}"
        branch = self._git("for-each-ref", "--format=%(refname:short)", "refs/heads/gitdns/groups-*")
        s["failover"] = self._git("rev-parse", branch)
        s["merge-failover"] = self.merge_pr(13, branch, self._git("log", "-1", "--format=%s", branch),
                                            "Approved-by: Erin <erin@example.com>", T0 + 3 * DAY + 10 * 60)
        for n, cluster in enumerate(IDS):
            self.agent(cluster, T0 + 3 * DAY + 15 * 60 + n * 60)

        # pull request #14: a cluster retired
        self._git("checkout", "-q", "-b", "erin/retire-eu-central-1")
        (self.work / "clusters" / "eu-central-1.yaml").unlink()
        s["retire"] = self.commit(person("Erin"), T0 + 5 * DAY, "clusters: retire eu-central-1")
        s["merge-retire"] = self.merge_pr(14, "erin/retire-eu-central-1", "clusters: retire eu-central-1",
                                          "Approved-by: Dave <dave@example.com>", T0 + 5 * DAY + HOUR)
        self.agent("eu-central-1", T0 + 5 * DAY + HOUR + 10 * 60)
        self.agent("us-east-1", T0 + 5 * DAY + HOUR + 11 * 60)
        return s


@contextlib.contextmanager
def _pinned(when: int) -> Iterator[None]:
    """git's dates pinned in this process's environment (the status branch's git inherits it)."""
    saved = {k: os.environ.get(k) for k in ("GIT_AUTHOR_DATE", "GIT_COMMITTER_DATE")}
    os.environ.update(at(when))
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
