"""docs/failover.md shows the real output of its commands: every example block of the page (a
fenced block below an ``<!-- example: SCENARIO [STEP] -->`` marker) is run for real and compared
with the page by the rules of `tests.docs.examples` (``…`` elisions, ``(stderr)`` lines, table
padding, mapped shas and clock readings), and a fenced block showing a ``$ `` command without a
marker fails, so no example of the page goes unchecked.

Scenario ``preview`` (the page's "What the preview reads"): a directory holding

- ``dns.git``, the desired repository's remote (``origin``): ``example-repo/`` committed on
  ``main``, its DNSPolicies without their health checks (their gateways' documentation
  addresses are beyond reach: `tests.e2e.agent_kit.drop_health_checks`, as every agent test);
- ``store``, the agents' ``--store-dir``: each of the three clusters applied ``main`` there with
  one real ``gitdns agent --once`` and pushed its status branch to ``origin``;
- ``repo``, the checkout the commands run in: ``main`` with ``origin`` pointing at ``dns.git``
  and the status branches fetched into ``refs/remotes/origin/gitdns-status/*``, as step 1 of the
  page's pull-request flow does before a preview.

So ``--repo .`` reads a store (the repository's own ``.gitdns/zones``) that holds no zone, and
``--store-dir ../store`` the zone the agents published.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.examples import DOCS, Scenario, at, blocks, copy_example, git
from tests.e2e.agent_kit import agent_once_at, drop_health_checks

PAGE = DOCS / "failover.md"
SCENARIOS = ("preview",)
CLUSTERS = ("eu-west-1", "eu-central-1", "us-east-1")
COMMITTED = 1_714_564_800  # 2024-05-01T12:00:00Z: main's commit; the agents apply it from 12:10 on


class Preview(Scenario):
    name = "preview"

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        bare, self.cwd, store = root / "dns.git", root / "repo", root / "store"
        self.repos = [bare, self.cwd]
        git("init", "-q", "--bare", "-b", "main", str(bare), cwd=root)
        copy_example(self.cwd)
        assert drop_health_checks(self.cwd), "example-repo has no health check any more: drop this step"
        (self.cwd / ".gitignore").write_text(".gitdns/\n", encoding="utf-8")
        git("init", "-q", "-b", "main", cwd=self.cwd)
        git("remote", "add", "origin", str(bare), cwd=self.cwd)
        git("add", "-A", cwd=self.cwd)
        git("commit", "-q", "-m", "example repository", cwd=self.cwd, env=at(COMMITTED))
        git("push", "-q", "origin", "main", cwd=self.cwd)
        for n, cluster in enumerate(CLUSTERS):
            done = agent_once_at(bare, cluster, root / "agents" / cluster, store, at(COMMITTED + 600 + 60 * n),
                                 timeout=120)
            assert done.returncode == 0, f"agent {cluster}: {done.stdout}{done.stderr[-3000:]}"
        assert (store / ".gitdns" / "zones").is_dir(), "the agents published nowhere the page's --store-dir names"
        git("fetch", "-q", "origin", "+refs/heads/gitdns-status/*:refs/remotes/origin/gitdns-status/*",
            cwd=self.cwd)
        fetched = git("for-each-ref", "--format=%(refname)", "refs/remotes/origin/gitdns-status", cwd=self.cwd)
        assert len(fetched.split()) == len(CLUSTERS), fetched


@pytest.fixture(scope="module")
def scenarios(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Scenario]:
    return {"preview": Preview(tmp_path_factory.mktemp("preview"))}


def test_every_example_names_a_scenario() -> None:
    """`blocks` refuses a `$ ` block without a marker; every marker names a scenario here."""
    named = {b.scenario for b in blocks(PAGE)}
    assert named == set(SCENARIOS)


@pytest.mark.parametrize("name", SCENARIOS)
def test_examples_show_the_real_output(name: str, scenarios: dict[str, Scenario]) -> None:
    mine = [b for b in blocks(PAGE) if b.scenario == name]
    assert mine
    problems = [p for block in mine for p in scenarios[name].check(block)]
    assert not problems, f"{len(problems)} example(s) of docs/failover.md differ from a real run:\n\n" + \
        "\n\n".join(problems)
