"""docs/cli.md shows the real output of each command: every example block of the page (a fenced
block below an ``<!-- example: SCENARIO [STEP] -->`` marker) is run for real and compared with
the page by the rules of `tests.docs.examples` (read them there: commands rewritten for the
scenario, ``…`` elisions, ``(stderr)`` lines, table padding, and the values that vary between
runs — commit shas of the scenario's repositories, wall-clock times, durations — which the page
keeps as concrete values standing for the real ones, consistently).

The scenarios (the SCENARIO of the markers):

- ``checkout``: the project checkout as a user has it: ``example-repo/`` committed in a git
  work tree (the ownership TXT then carry a ``rev`` label and ``apply`` names the commit it acts
  on), commands run from the top of it.  Steps: ``fresh`` (nothing applied), ``typo``
  (``policies/web.yaml`` says ``strategy: simpel``), ``applied`` (``gitdns apply
  --all-clusters`` ran), ``shared`` (applied, and ``example.com`` also holds records of
  a dns-operator cluster, two legacy owners and a gitdns cluster git no longer names, written
  into the ``local`` store with the registry's own encoding: `seed_shared`), ``foreign``
  (nothing applied; ``example.com`` holds two records nobody claims, as a zone gitdns takes
  over does).
- ``fleet``: tests/commands/test_status_history.py's fleet — a desired branch of four commits,
  status branches published by the agent's own publishing code (`StatusBranch.publish` of
  `documents(report)`) for five clusters, one failing, one removed from git, one never in git;
  ``https://git.example.com/platform/dns.git`` is its bare repository.
- ``audited``: tests/commands/test_history_audit.py's repository — a failover merged as pull
  request #7, restored later, one status branch applying the merge and withdrawing then
  restoring a target; ``dns.git`` in the working directory is its bare repository.
- ``walkthrough``: the page's "Walk-through on the example repository": a directory holding a
  copy of ``example-repo/``, where ``/tmp/demo`` stands for ``demo/`` in it.  Steps:
  ``first-apply`` (``gitdns apply --repo demo --cluster eu-west-1``, as the text says),
  ``longer-ttl`` (the TTL change of step 5, committed), ``typo`` (the broken file of step 6,
  committed).

Examples that are not run, each with its reason, are `SKIPPED` (and a marker naming a reason that
is no longer used fails the test, so the list stays short and true).
"""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from gitdns.core import registry
from gitdns.core.owner.zone import heartbeat_record
from gitdns.core.records import Action, Change, RecordSet
from gitdns.providers.local import LocalProvider
from tests.commands.test_history_audit import audited  # noqa: F401  (a fixture, used by name)
from tests.commands.test_status_history import fleet  # noqa: F401  (a fixture, used by name)
from tests.docs.examples import DOCS, URL, Scenario, at, blocks, copy_example, git

PAGE = DOCS / "cli.md"

SKIPPED = {
    "ssh-host-key": "needs an SSH git host whose host key changed and an HTTPS host behind a private CA; "
                    "tests/e2e/test_cli_git_hosts.py runs these failures against real servers",
    "daemon": "the orchestrator runs until it is stopped and needs nodes to probe (docs/health.md)",
}

DNS_OPERATOR = "7d0f4b1e-92c6-4a58-b3e7-1c5a9d2f8e40"  # a Kuadrant dns-operator cluster sharing the zone
DEPARTED = "5b2e9c1a-7d3f-4e8b-a0c6-94f1d2e8b731"  # a gitdns cluster git no longer names
CHECKOUT_TIME = 1_714_564_800  # 2024-05-01T12:00:00Z: the checkout's commit (the `rev` label's time)
DEMO_TIME = 1_714_651_200  # 2024-05-02T12:00:00Z: the walk-through's commits


class Checkout(Scenario):
    name = "checkout"

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.cwd = root / "project"
        self.repos = [self.cwd]
        self.steps = {"fresh": self.fresh, "typo": self.typo, "applied": self.applied, "shared": self.shared,
                      "foreign": self.foreign}
        self.cwd.mkdir()
        copy_example(self.cwd / "example-repo")
        (self.cwd / ".gitignore").write_text(".gitdns/\n/out/\n", encoding="utf-8")
        git("init", "-q", "-b", "main", cwd=self.cwd)
        git("add", "-A", cwd=self.cwd)
        git("commit", "-q", "-m", "example repository", cwd=self.cwd, env=at(CHECKOUT_TIME))

    def fresh(self) -> None:
        git("checkout", "-q", "HEAD", "--", "example-repo", cwd=self.cwd)
        git("clean", "-q", "-fdx", "--", "example-repo", "out", cwd=self.cwd)

    def typo(self) -> None:
        self.fresh()
        web = self.cwd / "example-repo" / "policies" / "web.yaml"
        web.write_text(web.read_text(encoding="utf-8").replace("strategy: simple", "strategy: simpel"),
                       encoding="utf-8")

    def applied(self) -> None:
        """``gitdns apply --all-clusters`` on a fresh checkout: run once, its store kept and put
        back byte for byte the next times."""
        self.fresh()
        store, kept = self.cwd / "example-repo" / ".gitdns", self.root / "applied-store"
        if kept.exists():
            shutil.copytree(kept, store, symlinks=True)
            return
        self.gitdns("apply", "--repo", "example-repo", "--all-clusters")
        shutil.copytree(store, kept, symlinks=True)

    def shared(self) -> None:
        self.applied()
        seed_shared(self.store)

    def foreign(self) -> None:
        self.fresh()
        unclaimed = [RecordSet("mail.example.com", "A", 300, ("192.0.2.25",)),
                     RecordSet("ftp.example.com", "A", 300, ("192.0.2.21",))]
        assert self.store.apply("example.com", [Change(Action.CREATE, None, r, r.key) for r in unclaimed]).ok

    @property
    def store(self) -> LocalProvider:
        return LocalProvider(self.cwd / "example-repo" / ".gitdns" / "zones")


def seed_shared(store: LocalProvider) -> None:
    """``shared.example.com A`` claimed by a dns-operator cluster (Kuadrant's current format, no
    ``rev``), by two legacy owners in one TXT (``old-a&&old-b``, no version) and by a departed
    gitdns cluster (its ``rev`` label, one address of its own), which also left a record of its
    own and its heartbeat."""
    shared = RecordSet("shared.example.com", "A", 60, ("192.0.2.1", "192.0.2.2", "192.0.2.3"))
    mine = RecordSet("old-api.example.com", "A", 60, ("192.0.2.30",))
    rev = "1700000000.5f3c2a1"
    records = [
        shared, mine,
        registry.ownership_record(shared, registry.OwnerLabels(DNS_OPERATOR, targets=("192.0.2.1", "192.0.2.2")))[0],
        RecordSet("kuadrant-a-shared.example.com", "TXT", 60,
                  (f"{registry.HERITAGE},{registry.LABEL_PREFIX}owner=old-a&&old-b",)),
        registry.ownership_record(shared, registry.OwnerLabels(DEPARTED, group="site-a", rev=rev,
                                                               targets=("192.0.2.3",)))[0],
        registry.ownership_record(mine, registry.OwnerLabels(DEPARTED, group="site-a", rev=rev))[0],
        heartbeat_record(DEPARTED, "example.com", 1_700_000_500),
    ]
    assert store.apply("example.com", [Change(Action.CREATE, None, r, r.key) for r in records]).ok


class Fleet(Scenario):
    name = "fleet"

    def __init__(self, root: Path, bare: Path) -> None:
        super().__init__(root)
        self.repos = [bare]
        self.subs = {URL: str(bare)}


class Audited(Scenario):
    name = "audited"

    def __init__(self, root: Path, bare: Path) -> None:
        super().__init__(root)
        (root / "dns.git").symlink_to(bare, target_is_directory=True)
        self.repos = [bare]


class Walkthrough(Scenario):
    name = "walkthrough"

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        copy_example(root / "example-repo")
        self.demo = root / "demo"
        self.subs = {"/tmp/demo": str(self.demo)}
        self.repos = [self.demo]
        self.env.update({"GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@example.com",
                         "GIT_COMMITTER_NAME": "Dev", "GIT_COMMITTER_EMAIL": "dev@example.com", **at(DEMO_TIME)})
        self.steps = {"longer-ttl": self.longer_ttl, "typo": self.typo}

    def longer_ttl(self) -> None:
        zone = self.demo / "zones" / "example-com.yaml"
        text = zone.read_text(encoding="utf-8")
        zone.write_text(text.replace("loadbalanced: 300", "loadbalanced: 600")
                        .replace("loadbalancedInner: 60", "loadbalancedInner: 30"), encoding="utf-8")
        git("commit", "-q", "-am", "example.com: longer TTLs", cwd=self.demo, env=at(DEMO_TIME + 3600))

    def typo(self) -> None:
        web = self.demo / "policies" / "web.yaml"
        web.write_text(web.read_text(encoding="utf-8").replace("strategy: simple", "strategy: simpel"),
                       encoding="utf-8")
        git("commit", "-q", "-am", "web: a typo", cwd=self.demo, env=at(DEMO_TIME + 7200))


SCENARIOS = ("checkout", "fleet", "audited", "walkthrough")


@pytest.fixture(scope="module")
def results(fleet: tuple[Path, list[str]], audited: tuple[object, dict[str, str]],  # noqa: F811
            tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[int, list[str]]]:
    """Every scenario's examples run, the scenarios side by side (each is one shell session of
    its own): per scenario, how many blocks ran and the mismatches."""
    bare = fleet[0]
    repo = audited[0]
    made: dict[str, Scenario] = {
        "checkout": Checkout(tmp_path_factory.mktemp("checkout")),
        "fleet": Fleet(tmp_path_factory.mktemp("fleet"), bare),
        "audited": Audited(tmp_path_factory.mktemp("audited"), repo.bare),  # type: ignore[attr-defined]
        "walkthrough": Walkthrough(tmp_path_factory.mktemp("walkthrough")),
    }
    page = blocks(PAGE)

    def run(name: str) -> tuple[int, list[str]]:
        mine = [b for b in page if b.scenario == name]
        return len(mine), [p for b in mine for p in made[name].check(b)]

    with ThreadPoolExecutor(max_workers=len(made)) as pool:
        futures = {name: pool.submit(run, name) for name in made}
        return {name: future.result() for name, future in futures.items()}


def test_every_example_names_a_scenario_or_a_listed_reason() -> None:
    named = {b.scenario for b in blocks(PAGE)}
    assert named - set(SCENARIOS) - set(SKIPPED) == set(), "an example names an unknown scenario"
    assert set(SKIPPED) - named == set(), "a skipped example is no longer on the page: drop its reason"
    assert set(SCENARIOS) <= named


@pytest.mark.parametrize("name", SCENARIOS)
def test_examples_show_the_real_output(name: str, results: dict[str, tuple[int, list[str]]]) -> None:
    ran, problems = results[name]
    assert ran
    assert not problems, f"{len(problems)} example(s) of docs/cli.md differ from a real run:\n\n" + \
        "\n\n".join(problems)
