"""A fleet pushing status at once through one real OpenSSH sshd with its default MaxStartups.

Twenty processes (each an agent: its own cluster id and cache directory) wait at a barrier
and publish their status branch at the same moment, in two rounds (the first, orphan commit;
then a change of every file).  sshd's default ``MaxStartups 10:30:100`` drops some of the
connections beyond ten unauthenticated ones (the client sees ``kex_exchange_identification:
read: Connection reset by peer``); the status branch retries such a refusal with backoff and
jitter, so every push lands: each branch tip on the bare repository is the commit its process
returned last.  The sshd is this test's own (not the session's), so its log counts only these
connections and no other test is slowed.
"""

from __future__ import annotations

import multiprocessing as mp
import queue
import re
import time
from collections.abc import Iterator
from multiprocessing.synchronize import Barrier
from pathlib import Path

import pytest

from gitdns.adapters.git.auth import GitAuth
from gitdns.adapters.status.branch import DEFAULT_PREFIX, StatusBranch
from tests.e2e.git_fixtures import start_or_skip
from tests.e2e.git_servers import SshServer, remote_ref, start_sshd

FLEET = 20
ROUNDS = 2
_DROPPED = re.compile(r"drop connection #\d+ .*past MaxStartups")

pytestmark = pytest.mark.slow


def cluster_id(i: int) -> str:
    return f"fleet-{i:02d}"


def agent(i: int, url: str, workdir: str, key: str, known_hosts: str, barrier: Barrier,
          results: mp.Queue) -> None:  # type: ignore[type-arg]
    """One agent: each round, build its status files, wait for the others, publish; report each
    outcome.  Round 0 is the first (orphan) commit, the later rounds change every file."""
    branch = StatusBranch(url, cluster_id(i), workdir=Path(workdir), timeout=30.0,
                          auth=GitAuth(ssh_key=Path(key), known_hosts=Path(known_hosts)))
    for rnd in range(ROUNDS):
        files = {"summary.yaml": f"cluster: c{i}\nready: true\nround: {rnd}\n",
                 f"zones/z{i}.example.com.yaml": f"zone: z{i}.example.com\nround: {rnd}\n"}
        barrier.wait(timeout=120)
        start = time.monotonic()
        try:
            sha = branch.publish(files, f"status of c{i}, round {rnd}")
            results.put((rnd, i, sha, None, time.monotonic() - start))
        except Exception as exc:  # reported to the test, which shows every failure
            reason = getattr(exc, "reason", "")
            results.put((rnd, i, None, f"{type(exc).__name__}({reason}): {exc}", time.monotonic() - start))


@pytest.fixture
def own_sshd(tmp_path: Path) -> Iterator[SshServer]:
    """An sshd of this test only, sshd's default MaxStartups (10:30:100), stopped by pid."""
    server = start_or_skip(start_sshd, tmp_path / "sshd")
    try:
        yield server
    finally:
        server.stop()


def test_twenty_agents_push_status_at_once_and_all_land(own_sshd: SshServer, tmp_path: Path) -> None:
    bare = own_sshd.create_repo("fleet")
    url = own_sshd.url(bare)
    ctx = mp.get_context("fork")  # one process per agent (fork: no interpreter start-up per agent)
    barrier = ctx.Barrier(FLEET)
    results: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
    procs = [ctx.Process(target=agent, args=(i, url, str(tmp_path / f"agent{i:02d}"), str(own_sshd.deploy_key),
                                             str(own_sshd.known_hosts), barrier, results), daemon=True)
             for i in range(FLEET)]
    began = time.monotonic()
    for proc in procs:
        proc.start()
    outcomes: dict[tuple[int, int], tuple[str | None, str | None, float]] = {}
    try:
        deadline = time.monotonic() + 150
        while len(outcomes) < FLEET * ROUNDS:
            try:
                rnd, i, sha, error, took = results.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                break
            outcomes[(rnd, i)] = (sha, error, took)
    finally:
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
    dropped = len(_DROPPED.findall(own_sshd.log.read_text(errors="replace")))
    failed = {key: error or "returned None" for key, (sha, error, _) in sorted(outcomes.items()) if error or not sha}
    slowest = max((took for *_, took in outcomes.values()), default=0.0)
    summary = (f"{len(outcomes)}/{FLEET * ROUNDS} publishes reported, {len(failed)} failed; sshd dropped {dropped} "
               f"connections past MaxStartups; slowest publish {slowest:.1f}s, all {time.monotonic() - began:.1f}s")
    print(summary)
    assert len(outcomes) == FLEET * ROUNDS and not failed, summary + "".join(
        f"\n  round {rnd} {cluster_id(i)}: {error}" for (rnd, i), error in failed.items())
    for i in range(FLEET):
        tip = remote_ref(bare, f"refs/heads/{DEFAULT_PREFIX}{cluster_id(i)}")
        assert tip == outcomes[(ROUNDS - 1, i)][0], f"{cluster_id(i)}: the remote tip is not the last commit returned"
