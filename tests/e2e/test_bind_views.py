"""Real geo answers: BIND serves the store's rendered views by client source address."""

from __future__ import annotations

import subprocess

import dns.rcode
import dns.rdatatype
import pytest

from gitdns.providers.local import LocalProvider
from tests.e2e.conftest import ZONE, BindViews, query, require_tool

pytestmark = pytest.mark.bind


def addresses(port: int, name: str, source: str) -> list[str]:
    response = query(port, name, "A", source=source)
    assert response.rcode() == dns.rcode.NOERROR, response
    return sorted(rd.address for rrset in response.answer if rrset.rdtype == dns.rdatatype.A for rd in rrset)


def test_named_checkzone_accepts_every_rendered_file(rendered_store: LocalProvider) -> None:
    checkzone = require_tool("named-checkzone")
    files = sorted(rendered_store.views_dir(ZONE).glob("*.zone"))
    assert [f.stem for f in files] == ["GEO-EU", "US", "default"]
    for path in files:
        result = subprocess.run(
            [checkzone, ZONE, str(path)], capture_output=True, text=True, timeout=30, check=False
        )
        assert result.returncode == 0, f"{path.name}:\n{result.stdout}{result.stderr}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [("127.0.0.2", ["1.1.1.1"]), ("127.0.0.3", ["2.2.2.2"]), ("127.0.0.1", ["1.1.1.1"])],
    ids=["GEO-EU", "US", "default-is-GEO-EU"],
)
def test_api_answers_by_client_geo(bind_views: BindViews, source: str, expected: list[str]) -> None:
    assert addresses(bind_views.port, "api.example.com.", source) == expected


def test_answer_follows_the_klb_chain(bind_views: BindViews) -> None:
    response = query(bind_views.port, "api.example.com.", "A", source="127.0.0.3")
    chain = [
        (rrset.name.to_text(), rd.to_text())
        for rrset in response.answer
        if rrset.rdtype == dns.rdatatype.CNAME
        for rd in rrset
    ]
    assert chain == [
        ("api.example.com.", "klb.api.example.com."),
        ("klb.api.example.com.", "us.klb.api.example.com."),
    ]


def test_weighted_names_are_flattened_in_every_view(bind_views: BindViews) -> None:
    for source in ("127.0.0.1", "127.0.0.2", "127.0.0.3"):
        assert addresses(bind_views.port, "geo-eu.klb.api.example.com.", source) == ["1.1.1.1"]
        assert addresses(bind_views.port, "us.klb.api.example.com.", source) == ["2.2.2.2"]


@pytest.mark.parametrize(("ci", "outcome"), [("true", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_missing_bind_fails_under_ci_and_skips_elsewhere(
    monkeypatch: pytest.MonkeyPatch, ci: str, outcome: type[BaseException]
) -> None:
    monkeypatch.setattr("tests.e2e.conftest.shutil.which", lambda *a, **k: None)
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="apt-get install"):
        require_tool("named")
