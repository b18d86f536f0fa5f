"""The ``reason`` label of gitdns_zone_errors_total comes from a closed set of words: never a
record name, an address or a message (a label value per record would grow the metric without end)."""

from __future__ import annotations

import pytest

from gitdns.agent.runner import error_reason


@pytest.mark.parametrize(("error", "reason"), [
    ("ProviderError: example.com: the provider refused the change", "ProviderError"),
    ("ProviderLibraryMissing: google-cloud-dns is not installed", "ProviderLibraryMissing"),
    ("ns1.example.test A: the server refused this content (REFUSED)", "Other"),
    ("stale writes still refused after 4 re-plans in 30s; the zone keeps changing", "Other"),
    ("InternalError: KeyError: 'x'; what this pass wrote stays", "InternalError"),
    ("x: y", "Other"),
    ("", "Other"),
])
def test_reason_is_the_errors_own_word_or_other(error: str, reason: str) -> None:
    assert error_reason(error) == reason


def test_a_refused_change_group_is_change_refused_not_its_record_name() -> None:
    error = "ns1.example.test A: the server refused this content (REFUSED)"
    assert error_reason(error, {error}) == "ChangeRefused"
    assert error_reason("Api.Example.Test A: refused", {"other"}) == "Other"  # a name, even capitalised
