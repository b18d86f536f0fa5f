"""docs/audit.md ("Audit a DNS change") shows real output: its repository is built as the page
tells its story (`tests.docs.audit_repo`: commits by named people, pull requests merged by a
forge with signed merge commits and approval trailers, a failover made with ``gitdns groups
set``, status branches written by real agent runs, a health withdrawal, a retired cluster), and
every example block of the page (marker ``<!-- example: audit -->``) is run in a clone of it and
compared by the rules of `tests.docs.examples`.

Scenario ``audit``: commands run from an empty directory; ``https://git.example.com/platform/
dns.git`` is the local bare repository; GnuPG's keyring (``GNUPGHOME``) holds the public keys
the page tells the auditor to import.  The commits' shas differ from run to run (their
signatures are made with new keys each time), so the page's shas are mapped to the run's.
Without gpg the test skips, except under ``CI=true`` where it fails.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docs.audit_repo import AuditRepo, Keys
from tests.docs.examples import DOCS, URL, Scenario, blocks

PAGE = DOCS / "audit.md"


class Audit(Scenario):
    name = "audit"

    def __init__(self, root: Path, repo: AuditRepo) -> None:
        super().__init__(root)
        self.cwd = root / "auditor"
        self.cwd.mkdir()
        self.subs = {URL: str(repo.bare)}
        self.repos = [repo.bare]
        self.env.update({"GNUPGHOME": str(repo.keys.home), "TZ": "UTC"})


@pytest.fixture(scope="module")
def audit_repo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuditRepo]:
    if shutil.which("gpg") is None or shutil.which("gpgconf") is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("gpg is not installed (apt-get install -y gnupg)")
        pytest.skip("gpg is not installed")
    root = tmp_path_factory.mktemp("audit")
    keys = Keys(root / "gpg")
    try:
        repo = AuditRepo(root, keys)
        repo.build()
        yield repo
    finally:
        keys.stop()


def test_every_example_is_run() -> None:
    assert {b.scenario for b in blocks(PAGE)} == {"audit"}


def test_the_tutorial_shows_the_real_output(audit_repo: AuditRepo, tmp_path: Path) -> None:
    scenario = Audit(tmp_path, audit_repo)
    problems = [p for block in blocks(PAGE) for p in scenario.check(block)]
    assert not problems, f"{len(problems)} example(s) of docs/audit.md differ from a real run:\n\n" + \
        "\n\n".join(problems)


def test_the_story_is_the_one_the_page_tells(audit_repo: AuditRepo) -> None:
    """The page's prose relies on these: three pull requests merged by the forge, the weight
    change signed, the failover made by `gitdns groups set`."""
    from tests.docs.examples import git

    bare = audit_repo.bare
    merges = git("log", "--first-parent", "--merges", "--format=%s", "main", cwd=bare).splitlines()
    assert [m.split(" from ")[0] for m in merges] == [f"Merge pull request #{n}" for n in (14, 13, 12)]
    env = {"GNUPGHOME": str(audit_repo.keys.home)}
    assert git("log", "-1", "--format=%G?", audit_repo.shas["weight"], cwd=bare, env=env) == "G"
    assert git("log", "-1", "--format=%G?", audit_repo.shas["failover"], cwd=bare, env=env) == "N"
    assert git("log", "-1", "--format=%s", audit_repo.shas["failover"], cwd=bare).startswith("groups(example-com)")
