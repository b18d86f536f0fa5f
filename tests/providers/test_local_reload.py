"""A `local` store's write tells the server serving its views to load them again — only when
the operator said so (``--local-reload rndc``, ``GITDNS_LOCAL_RELOAD``, ``localReload``), never
because the repository did (gitdns/adapters/serverreload.py).

These tests put a recording ``rndc`` first on PATH: it writes its arguments to a file and answers
as told, so what gitdns runs (and that it runs nothing without the setting) is seen exactly.
tests/e2e/test_local_reload_bind.py runs the real rndc against a real BIND.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from gitdns.adapters.serverreload import ServerReload, notes, reload_views
from gitdns.adapters.zonefile import write_views
from gitdns.agent.config import resolve
from gitdns.cli import main
from gitdns.core.records import Action, Change, RecordSet
from gitdns.errors import ConfigError
from gitdns.providers.fences import SETTINGS, Fences, fences_from
from gitdns.providers.local import LocalProvider

ZONE = "example.com"
VIEWS = ["GEO-EU", "US", "default"]
GIT_IDENTITY = {"GIT_AUTHOR_NAME": "Dev", "GIT_AUTHOR_EMAIL": "dev@example.com", "GIT_COMMITTER_NAME": "Dev",
                "GIT_COMMITTER_EMAIL": "dev@example.com"}

ZONE_DOC = """\
apiVersion: gitdns.io/v1alpha1
kind: Zone
metadata: {name: example-com}
spec:
  domain: example.com
  provider:
    type: local
    settings:
      path: .gitdns/zones
      viewClients: "GEO-EU=127.0.0.2/32;US=127.0.0.3/32"
"""
CLUSTER_DOC = """\
apiVersion: gitdns.io/v1alpha1
kind: Cluster
metadata: {{name: {name}}}
spec:
  id: {name}-1
  geo: {geo}
  gateways:
    - name: web
      namespace: default
      addresses: [{address}]
      listeners:
        - hostname: app.example.com
"""
POLICY_DOC = """\
apiVersion: gitdns.io/v1alpha1
kind: DNSPolicy
metadata: {name: app}
spec:
  targetRef: {gateway: web}
  strategy: loadbalanced
  loadBalancing:
    geo: {defaultGeo: GEO-EU}
"""


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, timeout=60,
                   env={**os.environ, **GIT_IDENTITY})


def desired_repo(repo: Path, eu_address: str = "192.0.2.10", zone_doc: str = ZONE_DOC) -> Path:
    """A repository with app.example.com served from two geos (views GEO-EU, US and default),
    committed; calling it again with another EU address commits the change."""
    fresh = not (repo / ".git").exists()
    for path, text in {"zones/example-com.yaml": zone_doc, "policies/app.yaml": POLICY_DOC,
                       "clusters/eu.yaml": CLUSTER_DOC.format(name="eu", geo="GEO-EU", address=eu_address),
                       "clusters/us.yaml": CLUSTER_DOC.format(name="us", geo="US", address="198.51.100.10"),
                       ".gitignore": ".gitdns/\n"}.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    if fresh:
        git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", f"eu at {eu_address}")
    return repo


@pytest.fixture
def rndc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A recording rndc first on PATH: one line of arguments per run in the file returned;
    RNDC_EXIT / RNDC_SAYS / RNDC_SLEEP make it fail, answer or hang."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log = tmp_path / "rndc.log"
    program = bindir / "rndc"
    program.write_text('#!/bin/sh\nprintf "%s\\n" "$*" >> "$RNDC_LOG"\n'
                       '[ -n "$RNDC_SLEEP" ] && sleep "$RNDC_SLEEP"\n'
                       'echo "${RNDC_SAYS:-zone reload queued}" >&2\nexit "${RNDC_EXIT:-0}"\n')
    program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("RNDC_LOG", str(log))
    for name in ("GITDNS_LOCAL_RELOAD", "GITDNS_RNDC_CONFIG", "RNDC_EXIT", "RNDC_SAYS", "RNDC_SLEEP"):
        monkeypatch.delenv(name, raising=False)
    return log


def ran(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def apply(repo: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int, str]:
    code = main(["apply", "--repo", str(repo), "--all-clusters", *flags])
    out, err = capsys.readouterr()
    return code, out + err


def serials(views: Path) -> dict[str, int]:
    """The SOA serial of each view's master file."""
    out = {}
    for path in sorted(views.glob("*.zone")):
        match = re.search(r"^@ \d+ IN SOA \S+ \S+ (\d+) ", path.read_text(), re.MULTILINE)
        assert match, path
        out[path.stem] = int(match.group(1))
    return out


# --- who decides ----------------------------------------------------------------------------------------------


def test_without_the_operators_setting_nothing_is_run(tmp_path: Path, rndc: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    repo = desired_repo(tmp_path / "dns")
    assert apply(repo, capsys)[0] == 0
    desired_repo(repo, eu_address="192.0.2.20")
    code, out = apply(repo, capsys)
    assert code == 0 and "192.0.2.20" in (repo / ".gitdns/zones/example.com.views/GEO-EU.zone").read_text()
    assert ran(rndc) == [] and "reload" not in out
    assert Fences().reload is None and fences_from({}, env={}).reload is None


def test_the_repository_cannot_ask_for_a_reload(tmp_path: Path, rndc: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """No Zone setting names a reload or a program: one that tries is an unknown setting."""
    hostile = ZONE_DOC.replace("      path: .gitdns/zones\n", "      path: .gitdns/zones\n      reload: rndc\n"
                               "      rndcConfig: /etc/bind/rndc.conf\n")
    repo = desired_repo(tmp_path / "dns", zone_doc=hostile)
    assert main(["validate", str(repo)]) == 1
    out = capsys.readouterr()
    assert "spec.provider.settings.reload: provider local has no setting 'reload'" in out.out
    assert "spec.provider.settings.rndcConfig: provider local has no setting 'rndcConfig'" in out.out
    assert apply(repo, capsys)[0] != 0
    assert ran(rndc) == []


def test_the_operators_setting_reloads_each_changed_view_once(tmp_path: Path, rndc: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    repo = desired_repo(tmp_path / "dns")
    conf = tmp_path / "rndc.conf"
    conf.write_text('key "gitdns" { algorithm hmac-sha256; secret "c2VjcmV0"; };\n')
    flags = ("--local-reload", "rndc", "--rndc-config", str(conf))
    code, out = apply(repo, capsys, *flags)
    # eu's pass writes the views first (a server configured for them loads them now), us's write
    # changes them: each changed view is reloaded once per write
    assert code == 0
    assert ran(rndc) == [f"-c {conf} reload example.com IN {view}" for view in VIEWS] * 2
    for cluster in ("eu", "us"):
        assert f"[{cluster}] zone example.com: server reload: rndc reloaded zone example.com in view(s) GEO-EU, US, " \
               "default" in out
    rndc.unlink()
    assert apply(repo, capsys, *flags)[0] == 0
    assert ran(rndc) == []  # nothing changed: nothing to reload
    desired_repo(repo, eu_address="192.0.2.20")
    assert apply(repo, capsys, *flags)[0] == 0
    assert ran(rndc) == [f"-c {conf} reload example.com IN {view}" for view in VIEWS]


def test_the_environment_sets_it_too(tmp_path: Path, rndc: Path, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    repo = desired_repo(tmp_path / "dns")
    monkeypatch.setenv("GITDNS_LOCAL_RELOAD", "rndc")
    assert apply(repo, capsys)[0] == 0
    assert ran(rndc) == [f"reload example.com IN {view}" for view in VIEWS] * 2  # rndc's own configuration


def test_a_failed_reload_is_reported_and_the_write_stands(tmp_path: Path, rndc: Path,
                                                          capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    repo = desired_repo(tmp_path / "dns")
    monkeypatch.setenv("RNDC_EXIT", "1")
    monkeypatch.setenv("RNDC_SAYS", "rndc: connect failed: 127.0.0.1#953: connection refused")
    code, out = apply(repo, capsys, "--local-reload", "rndc")
    assert code == 0, out
    assert ("server reload failed: rndc reload example.com IN US: rndc: connect failed: 127.0.0.1#953: connection "
            "refused; the view files are written") in out
    assert "198.51.100.10" in (repo / ".gitdns/zones/example.com.views/US.zone").read_text()
    desired_repo(repo, eu_address="192.0.2.20")
    code = main(["apply", "--repo", str(repo), "--all-clusters", "--local-reload", "rndc", "--format", "json"])
    assert code == 0
    reloads = [line for entry in json.loads(capsys.readouterr().out) for line in entry["reloads"]]
    assert len(reloads) == 3 and all(line.startswith("server reload failed: rndc reload example.com IN ")
                                     for line in reloads)


def test_the_agent_reads_it_from_flags_environment_and_config_file(tmp_path: Path) -> None:
    conf = tmp_path / "rndc.conf"
    conf.write_text("")
    config_file = tmp_path / "agent.yaml"
    config_file.write_text(f"localReload: rndc\nrndcConfig: {conf}\n")
    config = resolve({"repo": "r", "config": str(config_file)}, env={})
    fences = fences_from({name: getattr(config, name) for name in SETTINGS}, env={})
    assert fences.reload == ServerReload("rndc", conf)
    config = resolve({"repo": "r"}, env={"GITDNS_LOCAL_RELOAD": "rndc"})
    assert fences_from({name: getattr(config, name) for name in SETTINGS}, env={}).reload == ServerReload()


@pytest.mark.parametrize(("reload", "config", "says"), [
    ("notify", None, "--local-reload (GITDNS_LOCAL_RELOAD, localReload in the agent's config file): 'notify' is not "
                     "one of none, rndc"),
    ("none", "/etc/bind/rndc.conf", "--rndc-config (GITDNS_RNDC_CONFIG, rndcConfig in the agent's config file) is "
                                    "read only with --local-reload rndc"),
    ("rndc", "/nonexistent/rndc.conf", "'/nonexistent/rndc.conf' is not a file"),
])
def test_a_wrong_setting_stops_at_start_naming_it(reload: str, config: str | None, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Fences.parse(local_reload=reload, rndc_config=config)
    assert says in str(caught.value)


def test_a_wrong_setting_stops_the_verb(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = desired_repo(tmp_path / "dns")
    code, out = apply(repo, capsys, "--local-reload", "sighup")
    assert code == 1 and "'sighup' is not one of none, rndc" in out
    assert not (repo / ".gitdns").exists()


# --- what is run ----------------------------------------------------------------------------------------------


def test_only_checked_names_become_arguments(rndc: Path) -> None:
    reload = ServerReload()
    for zone in ("-c/etc/passwd", "example.com;", "Example.com", "a b.com", ""):
        assert all(not r.ok and r.message.startswith("not asked") for r in reload_views(reload, zone, ["US"]))
    results = reload_views(reload, ZONE, ["-p1", "US", "a b", "GEO-EU"])
    assert [r.view for r in results if r.ok] == ["US", "GEO-EU"]
    assert ran(rndc) == ["reload example.com IN US", "reload example.com IN GEO-EU"]


def test_a_server_that_does_not_answer_costs_one_timeout(rndc: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RNDC_SLEEP", "5")
    results = reload_views(ServerReload(timeout=0.5), ZONE, VIEWS)
    assert [(r.ok, r.message) for r in results] == [
        (False, "no answer in 0.5s"),
        (False, "not asked: the server did not answer for an earlier view"),
        (False, "not asked: the server did not answer for an earlier view")]
    assert len(ran(rndc)) == 1


def test_rndc_missing_is_a_failure_not_a_crash() -> None:
    results = reload_views(ServerReload(program="gitdns-test-no-such-rndc"), ZONE, ["US"])
    assert not results[0].ok and "is not on PATH" in results[0].message
    assert notes(ServerReload(), ZONE, results)[0].startswith("server reload failed: rndc reload example.com IN US")


# --- the store's own writes -------------------------------------------------------------------------------------


def _record(address: str) -> RecordSet:
    return RecordSet("www.example.com", "A", 300, (address,))


def test_every_write_through_the_store_reloads_and_raises_the_serial(tmp_path: Path, rndc: Path) -> None:
    """A write that is not a reconcile (prune-owner, adopt, groups set --direct, a heartbeat)
    re-renders the views and reloads them; the SOA serial rises with every write, which is what
    CoreDNS's ``file`` plugin reloads on."""
    store = LocalProvider(tmp_path / "store", reload=ServerReload())
    assert store.apply(ZONE, [Change(Action.CREATE, None, _record("192.0.2.1"), _record("192.0.2.1").key)]).ok
    write_views(store.views_dir(ZONE), ZONE, store.read)
    assert ran(rndc) == [] and store.take_reload_notes(ZONE) == []  # never rendered before: nothing served it
    before = serials(store.views_dir(ZONE))
    seen = [before["default"]]
    old = _record("192.0.2.1")
    for n in range(2, 5):
        new = _record(f"192.0.2.{n}")
        assert store.apply(ZONE, [Change(Action.UPDATE, old, new, new.key)]).ok
        old = new
        seen.append(serials(store.views_dir(ZONE))["default"])
    assert seen == sorted(set(seen)) and len(seen) == 4
    assert ran(rndc) == ["reload example.com IN default"] * 3
    assert store.take_reload_notes(ZONE) == ["server reload: rndc reloaded zone example.com in view(s) default"] * 3
    assert store.take_reload_notes(ZONE) == []


def test_a_store_without_the_setting_runs_nothing(tmp_path: Path, rndc: Path) -> None:
    store = LocalProvider(tmp_path / "store")
    assert store.apply(ZONE, [Change(Action.CREATE, None, _record("192.0.2.1"), _record("192.0.2.1").key)]).ok
    write_views(store.views_dir(ZONE), ZONE, store.read)
    assert store.apply(ZONE, [Change(Action.UPDATE, _record("192.0.2.1"), _record("192.0.2.2"),
                                     _record("192.0.2.2").key)]).ok
    assert ran(rndc) == [] and store.take_reload_notes(ZONE) == []
