"""A provider whose library is missing fails its own zones, never the agent (issue: a zone on a
provider the installation lacks put the whole agent in CrashLoopBackOff).  The library is made
unimportable for the agent process only, by a directory first on its PYTHONPATH whose
``botocore`` package raises ImportError, as a missing install does."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e.agent_kit import ROOT, AgentProcess, DesiredRepo, run_once
from tests.e2e.faults_kit import conditions, data, metric

LIBRARY_ERROR = "ProviderLibraryMissing"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> DesiredRepo:
    blocked = tmp_path / "no-sdk" / "botocore"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text('raise ImportError("No module named \'botocore\'", name="botocore")\n')
    path = os.pathsep.join([str(blocked.parent), str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    monkeypatch.setenv("PYTHONPATH", path)
    desired = DesiredRepo(tmp_path / "repo")
    zone = desired.work / "zones" / "example-org.yaml"
    text = zone.read_text()
    assert "type: local" in text
    zone.write_text(text.split("  provider:")[0] + "  provider:\n    type: route53\n")
    desired.commit("example.org moves to route53")
    return desired


def test_once_fails_the_zone_not_the_agent(repo: DesiredRepo, tmp_path: Path) -> None:
    done = run_once(repo, "eu-west-1", tmp_path / "state")
    out = done.stdout + done.stderr
    assert "Traceback" not in out, out[-3000:]
    assert done.returncode == 1, out[-3000:]  # NotReady: one zone failed
    assert f"zone example.org: error: {LIBRARY_ERROR}" in done.stdout, out[-3000:]
    assert "pip install 'gitdns[route53]'" in done.stdout
    assert "zone example.com: 24 change(s) applied" in done.stdout, done.stdout
    assert any(key.name == "api.example.com" for key in data(repo)), data(repo)  # the other zone is written


def test_serving_agent_stays_ready_and_counts_the_zone_error(repo: DesiredRepo, tmp_path: Path) -> None:
    agent = AgentProcess(repo, "eu-west-1", tmp_path / "state", "--poll-interval", "1")
    try:
        assert agent.wait(lambda: agent.get("/readyz")[0] == 200, 90), agent.log.read_text()[-3000:]
        errors = f'gitdns_zone_errors_total{{reason="{LIBRARY_ERROR}",zone="example.org"}}'
        assert agent.wait(lambda: metric(agent, errors) >= 1, 60), agent.get("/metrics")[1].decode()[-3000:]
        assert conditions(agent.status())["Ready"][0] == "False"  # the condition says it; the probe does not
        assert metric(agent, "gitdns_ready ") == 0
        assert data(repo, "example.com"), "the other zone was not reconciled"
        zone_doc = agent.status().get("zones/example.org.yaml")
        assert isinstance(zone_doc, dict) and LIBRARY_ERROR in str(zone_doc.get("error")), zone_doc
        assert agent.get("/healthz")[0] == 200
    finally:
        assert agent.stop() == 0
