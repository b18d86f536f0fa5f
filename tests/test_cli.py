"""The command line, end to end on a copy of example-repo/ (the `local` record store)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gitdns.cli import main
from gitdns.commands import EXIT_CHANGES, EXIT_ERROR, EXIT_OK, EXIT_STALLED

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    dest = tmp_path / "repo"
    shutil.copytree(ROOT / "example-repo", dest, ignore=shutil.ignore_patterns(".gitdns"))
    return dest


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_validate_clean_repo(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "validate", str(repo))
    assert code == EXIT_OK and out.startswith("valid:")


def test_validate_reports_every_problem_with_file_and_line(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo / "policies" / "broken.yaml").write_text(
        "apiVersion: gitdns.io/v1alpha1\nkind: DNSPolicy\nmetadata:\n  name: broken\nspec:\n"
        "  targetRef: {gateway: api-gw}\n  strategy: roundrobin\n"
        "  loadBalancing:\n    weighted: {defaultWeight: 9999}\n"
    )
    code, out, _ = run(capsys, "validate", str(repo), "--format", "json")
    doc = json.loads(out)
    assert code == EXIT_ERROR and not doc["valid"]
    broken = [p for p in doc["problems"] if p["file"].endswith("broken.yaml")]
    assert len(broken) >= 2
    assert {p["line"] for p in broken} >= {7, 9}
    assert any("strategy" in p["path"] for p in broken)


def test_apply_then_second_apply_changes_nothing(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "apply", "--repo", str(repo), "--all-clusters")
    assert code == EXIT_OK, out
    assert (repo / ".gitdns" / "zones" / "example.com.json").exists()
    code, out, _ = run(capsys, "plan", "--repo", str(repo), "--all-clusters", "--exit-code")
    assert code == EXIT_OK, out
    code, out, _ = run(capsys, "zone", "show", "example.com", "--repo", str(repo), "--format", "json")
    doc = json.loads(out)
    api = [r for r in doc["records"] if r["name"] == "api.example.com"]
    assert len(api) == 1 and len(api[0]["owners"]) == 3


def test_plan_exit_code_when_changes_pending(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "plan", "--repo", str(repo), "--cluster", "eu-west-1", "--exit-code",
                       "--format", "json")
    assert code == EXIT_CHANGES
    assert json.loads(out)["plans"][0]["summary"]["create"] > 0


def test_broken_file_holds_only_its_zone_and_the_zone_is_not_touched(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "apply", "--repo", str(repo), "--all-clusters")[0] == EXIT_OK
    store = repo / ".gitdns" / "zones" / "example.com.json"
    before = store.read_bytes()
    policy = next(p for p in (repo / "policies").glob("*.yaml") if "loadbalanced" in p.read_text())
    policy.write_text(policy.read_text().replace("defaultWeight: 120", "defaultWeight: -5"))
    # the loadbalanced policy is broken: its zone is held, nothing written; example.org still applies
    code, out, err = run(capsys, "apply", "--repo", str(repo), "--all-clusters")
    assert code == EXIT_ERROR
    assert store.read_bytes() == before
    assert "held" in out and str(policy.relative_to(repo)) in err


def test_mass_change_stalls_and_force_applies(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = repo / "records" / "bulk.yaml"
    rows = "".join(f"    - {{name: h{i}, type: A, values: [192.0.2.{i}]}}\n" for i in range(1, 21))
    records.write_text("apiVersion: gitdns.io/v1alpha1\nkind: RecordSet\nmetadata:\n  name: bulk\n"
                       f"spec:\n  zone: example-org\n  records:\n{rows}")
    assert run(capsys, "apply", "--repo", str(repo), "--cluster", "eu-west-1")[0] == EXIT_OK
    records.unlink()
    code, out, _ = run(capsys, "apply", "--repo", str(repo), "--cluster", "eu-west-1")
    assert code == EXIT_STALLED and "MassChangeRefused" in out
    code, out, _ = run(capsys, "apply", "--repo", str(repo), "--cluster", "eu-west-1", "--force")
    assert code == EXIT_OK


def test_unknown_cluster_is_a_clear_error(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "plan", "--repo", str(repo), "--cluster", "nope")
    assert code == EXIT_ERROR and "--cluster nope" in err and "eu-west-1" in err


def test_help_imports_no_heavy_module() -> None:
    probe = (
        "import sys\n"
        "from gitdns.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = [m for m in ('boto3', 'botocore', 'kubernetes', 'google', 'azure', 'jinja2', 'jsonschema',"
        " 'ruamel', 'git', 'dns') if m in sys.modules]\n"
        "print('HEAVY=' + ','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert "HEAVY=\n" in out, out
    assert "exit codes:" in out and "examples:" in out


def test_render_writes_dnsrecords_for_kuadrant_zones_only(repo: Path, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "rendered"
    code, stdout, _ = run(capsys, "render", "--repo", str(repo), "--cluster", "eu-west-1", "--out", str(out))
    assert code == EXIT_OK and stdout == ""  # both example zones are published by gitdns itself
    zone_file = repo / "zones" / "example-com.yaml"
    zone_file.write_text(zone_file.read_text().replace("publisher: gitdns", "publisher: kuadrant"))
    code, stdout, _ = run(capsys, "render", "--repo", str(repo), "--cluster", "eu-west-1", "--out", str(out))
    assert code == EXIT_OK
    files = sorted(p.name for p in (out / "eu-west-1").iterdir())
    assert files == ["api-example-com.yaml"]
    assert "kind: DNSRecord" in (out / "eu-west-1" / "api-example-com.yaml").read_text()
    # gitdns does not publish a zone whose publisher is kuadrant
    code, stdout, _ = run(capsys, "apply", "--repo", str(repo), "--cluster", "eu-west-1")
    assert "publisher is kuadrant" in stdout
    assert not (repo / ".gitdns" / "zones" / "example.com.json").exists()


def _git(repo: Path, *args: str) -> None:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "PATH": "/usr/bin:/bin:/usr/local/bin"}
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=env)


def _bulk(repo: Path, last_octet_offset: int = 0) -> Path:
    records = repo / "records" / "bulk.yaml"
    rows = "".join(f"    - {{name: h{i}, type: A, values: [192.0.2.{i + last_octet_offset}]}}\n"
                   for i in range(1, 21))
    records.write_text("apiVersion: gitdns.io/v1alpha1\nkind: RecordSet\nmetadata:\n  name: bulk\n"
                       f"spec:\n  zone: example-org\n  records:\n{rows}")
    return records


def test_reviewed_removal_in_git_is_exempt_from_the_mass_change_guard(
        repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _bulk(repo)
    (repo / ".gitignore").write_text(".gitdns/\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "bulk records")
    assert run(capsys, "apply", "--repo", str(repo), "--cluster", "eu-west-1")[0] == EXIT_OK
    _git(repo, "rm", "-q", "records/bulk.yaml")
    _git(repo, "commit", "-qm", "remove the bulk records (reviewed in a pull request)")
    code, out, _ = run(capsys, "apply", "--repo", str(repo), "--cluster", "eu-west-1")
    assert code == EXIT_OK, out
    assert "reviewed change" in out


def test_commit_trailer_acknowledges_a_mass_update(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _bulk(repo)
    (repo / ".gitignore").write_text(".gitdns/\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "bulk records")
    assert run(capsys, "apply", "--repo", str(repo), "--cluster", "eu-west-1")[0] == EXIT_OK
    _bulk(repo, last_octet_offset=100)
    _git(repo, "commit", "-qam", "renumber")
    assert run(capsys, "apply", "--repo", str(repo), "--cluster", "eu-west-1")[0] == EXIT_STALLED
    _git(repo, "commit", "-q", "--allow-empty", "-m", "renumber\n\nGitdns-Allow-Mass-Change: example.org")
    code, out, _ = run(capsys, "apply", "--repo", str(repo), "--cluster", "eu-west-1")
    assert code == EXIT_OK, out
    assert "acknowledged in git" in out


def test_owners_prune_owner_and_adopt(repo: Path, capsys: pytest.CaptureFixture[str],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from gitdns.core.records import Action, Change, RecordSet
    from gitdns.core.registry import OwnerLabels, ownership_record
    from gitdns.providers.local import LocalProvider

    assert run(capsys, "apply", "--repo", str(repo), "--all-clusters")[0] == EXIT_OK
    store = LocalProvider(repo / ".gitdns" / "zones")
    ghost = RecordSet("api.example.com", "CNAME", 300, ("klb.api.example.com",))
    dead_a = RecordSet("dead.example.com", "A", 60, ("198.51.100.9",))
    changes = [Change(Action.CREATE, None, ownership_record(r, OwnerLabels("dead-uid"), "example.com")[0], r.key)
               for r in (ghost, dead_a)] + [Change(Action.CREATE, None, dead_a, dead_a.key)]
    assert store.apply("example.com", changes).ok
    code, out, _ = run(capsys, "owners", "example.com", "--repo", str(repo), "--format", "json")
    rows = {r["owner"]: r for r in json.loads(out)}
    assert not rows["dead-uid"]["knownToGit"] and rows["dead-uid"]["records"] == 2
    monkeypatch.setattr("builtins.input", lambda _prompt: "no")
    assert run(capsys, "prune-owner", "dead-uid", "--zone", "example.com", "--repo", str(repo))[0] == EXIT_OK
    assert dead_a.key in {r.key for r in store.read("example.com").records}
    code, out, _ = run(capsys, "prune-owner", "dead-uid", "--zone", "example.com", "--repo", str(repo), "--yes")
    assert code == EXIT_OK
    keys = {r.key for r in store.read("example.com").records}
    assert dead_a.key not in keys and ghost.key in keys  # the shared record keeps its other owners
    live = next(r["owner"] for r in rows.values() if r["knownToGit"])
    code, _, err = run(capsys, "prune-owner", live, "--zone", "example.com", "--repo", str(repo), "--yes")
    assert code == EXIT_ERROR and "in git" in err
    legacy = RecordSet("legacy.example.com", "A", 300, ("192.0.2.200",))
    assert store.apply("example.com", [Change(Action.CREATE, None, legacy, legacy.key)]).ok
    code, _, err = run(capsys, "adopt", "legacy.example.com", "--zone", "example.com", "--cluster", "eu-west-1",
                       "--repo", str(repo))
    assert code == EXIT_ERROR and "desired state" in err
    code, out, _ = run(capsys, "adopt", "legacy.example.com", "--zone", "example.com", "--cluster", "eu-west-1",
                       "--repo", str(repo), "--force")
    assert code == EXIT_OK and "adopted" in out


@pytest.mark.parametrize(("argv", "usage", "extras", "meant"), [
    (["status", "--clutser", "eu-west-1"], "usage: gitdns status ", "--clutser eu-west-1", "--cluster"),
    (["history", "api.example.com", "--sinse", "2024-05-01"], "usage: gitdns history ", "--sinse 2024-05-01",
     "--since"),
    (["groups", "set", "example.com", "a", "--forse"], "usage: gitdns groups set ", "--forse", "--force"),
    (["status", "--repo=.", "stray"], "usage: gitdns status ", "stray", None),
    (["status", "--json"], "usage: gitdns status ", "--json", "--format json"),
    (["history", "api.example.com", "--cluster", "x"], "usage: gitdns history ", "--cluster x", None),
])
def test_an_unknown_flag_is_reported_by_its_verb(argv: list[str], usage: str, extras: str, meant: str | None,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(argv)
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.startswith(usage), err
    verb = usage[len("usage: "):].strip()
    assert f"{verb}: error: unrecognized arguments: {extras}" in err, err
    assert (f"(did you mean {meant}?)" in err) if meant else "did you mean" not in err
