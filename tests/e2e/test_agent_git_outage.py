"""Real `gitdns agent` processes while git is down, and on a head they must refuse.

- Git down for long (its backoff grown past the poll interval, validation far away): a
  break-glass `gitdns groups set --direct` is followed from the last good revision, and git
  still backs off alone.
- Restarted on an unsigned head with signature verification on: the agent neither exits nor
  applies it; the last verified revision, read back from its status branch, stays in force.

Every wait is for a condition with a generous timeout; nothing asserts wall-clock time.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.e2e.agent_kit import AgentProcess, DesiredRepo, git, run_once
from tests.e2e.faults_kit import conditions, data

SITE_B_ADDRESS = "198.51.100.10"  # eu-central-1, group site-b


def addresses(repo: DesiredRepo, zone: str = "example.com") -> set[str]:
    return {value for values in data(repo, zone).values() for value in values}


def test_a_break_glass_switch_is_followed_while_git_is_down(tmp_path: Path) -> None:
    repo = DesiredRepo(tmp_path)
    quiet = ("--poll-interval", "2", "--validate-delay", "300", "--quiet-period", "3600")
    agents = {name: AgentProcess(repo, name, tmp_path / name, *quiet) for name in ("eu-west-1", "eu-central-1")}
    try:
        for agent in agents.values():
            assert agent.wait(lambda a=agent: a.get("/readyz")[0] == 200, 90), agent.log.read_text()[-3000:]
        assert SITE_B_ADDRESS in addresses(repo)
        away = repo.bare.with_name("away.git")
        repo.bare.rename(away)  # git is gone
        for agent in agents.values():  # until git's backoff (6 s and more) exceeds the 2 s poll
            assert agent.wait(lambda a=agent: int(a.status().get("gitFailures", 0)) >= 4, 120), \
                agent.log.read_text()[-3000:]
        switched = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "gitdns.cli", "groups", "set", "example.com", "site-a",
                               "--direct", "--repo", str(repo.work), "--store-dir", str(repo.zones.parent)],
                              capture_output=True, text=True, timeout=120,
                              check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        central = agents["eu-central-1"]
        # site-b is no longer active: its agent withdraws its address, without git and long before
        # its next validation (300 s away)
        assert central.wait(lambda: SITE_B_ADDRESS not in addresses(repo), 60), central.log.read_text()[-4000:]
        followed = time.monotonic() - switched
        assert central.wait(lambda: conditions(central.status()).get("GroupsDivergedFromGit")
                            == ("True", "ZoneSerialAhead"), 30), central.log.read_text()[-3000:]
        assert conditions(central.status())["SourceAvailable"][0] == "False"  # git was down all along
        assert central.get("/healthz")[0] == 200
        print(f"break-glass followed {followed:.1f} s after the switch with git down (poll 2 s)")
        away.rename(repo.bare)
    finally:
        for agent in agents.values():
            assert agent.stop() == 0


def ssh_signing_key(directory: Path) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    key = directory / "signer"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "signer", "-f", str(key)], check=True)
    signers = directory / "allowed_signers"
    signers.write_text(f"ops@example.test {key.with_suffix('.pub').read_text().strip()}\n")
    return key, signers


def commit_signed(repo: DesiredRepo, key: Path | None, message: str) -> str:
    sign = ["-c", "gpg.format=ssh", "-c", f"user.signingKey={key}", "-c", "user.email=ops@example.test"] if key else []
    git("add", "-A", cwd=repo.work)
    git(*sign, "commit", "-q", "--allow-empty", *(["-S"] if key else ["--no-gpg-sign"]), "-m", message, cwd=repo.work)
    git("push", "-q", "origin", "main", cwd=repo.work)
    return git("rev-parse", "HEAD", cwd=repo.work)


def test_restarted_on_an_unsigned_head_keeps_the_last_verified_revision(tmp_path: Path) -> None:
    repo = DesiredRepo(tmp_path)
    key, signers = ssh_signing_key(tmp_path / "keys")
    good = commit_signed(repo, key, "signed: the reviewed state")
    verify = ("--verify-ssh-signers", str(signers))
    first = run_once(repo, "eu-west-1", tmp_path / "state-1", *verify)
    assert first.returncode == 0, first.stdout + first.stderr[-3000:]
    before = data(repo)
    cluster = repo.work / "clusters" / "eu-west-1.yaml"
    cluster.write_text(cluster.read_text().replace("192.0.2.", "203.0.113."))
    bad = commit_signed(repo, None, "unsigned: never reviewed")
    # a restart: a fresh state directory, so only the status branch knows what was applied
    again = run_once(repo, "eu-west-1", tmp_path / "state-2", *verify)
    assert again.returncode == 1, again.stdout + again.stderr[-3000:]  # --once says the head was not applied
    assert "SourceAvailable: SignatureRefused" in again.stdout, again.stdout
    assert f"{good[:7]} stays in force" in again.stdout
    assert bad[:7] in again.stdout
    assert data(repo) == before  # nothing of the unsigned commit reached the zone
    # a long-running agent started on the same head stays up and reports it
    agent = AgentProcess(repo, "eu-west-1", tmp_path / "state-3", "--poll-interval", "1", *verify)
    try:
        assert agent.wait(lambda: conditions(agent.status()).get("SourceAvailable")
                          == ("False", "SignatureRefused"), 90), agent.log.read_text()[-3000:]
        # serving the last verified revision (restored): ready, while SourceAvailable says why not newer
        assert agent.get("/healthz")[0] == 200 and agent.get("/readyz")[0] == 200
        # the next signed commit is applied at the next poll: no backoff grew meanwhile
        cluster.write_text(cluster.read_text().replace("203.0.113.", "192.0.2."))
        (repo.work / "records" / "example-com.yaml").write_text(
            (repo.work / "records" / "example-com.yaml").read_text())
        fixed = commit_signed(repo, key, "signed: back to the reviewed addresses")
        assert agent.wait(lambda: conditions(agent.status()).get("SourceAvailable", ("", ""))[0] == "True", 60), \
            agent.log.read_text()[-3000:]
        assert agent.wait(lambda: agent.status().get("summary.yaml", {}).get("appliedRevision") == fixed, 60)
        assert data(repo) == before
        assert agent.status().get("gitFailures") == 0
    finally:
        assert agent.stop() == 0
