"""Shared fixtures: the worked example of ARCHITECTURE.md §4 as store records."""

from __future__ import annotations

import pytest

from gitdns.core.records import RecordSet


def worked_example_records() -> tuple[RecordSet, ...]:
    """Zone example.com, host api.example.com: 8 data records (no ownership TXT)."""
    host, klb = "api.example.com", "klb.api.example.com"
    eu, us = f"geo-eu.{klb}", f"us.{klb}"
    a_eu, a_us = f"1hrxie-30ics1.{klb}", f"17ol5y-30ics1.{klb}"
    return (
        RecordSet(host, "CNAME", 300, (klb,)),
        RecordSet(klb, "CNAME", 300, (eu,), set_id="GEO-EU", geo="GEO-EU"),
        RecordSet(klb, "CNAME", 300, (us,), set_id="US", geo="US"),
        RecordSet(klb, "CNAME", 300, (eu,), set_id="default", geo="*"),
        RecordSet(eu, "CNAME", 60, (a_eu,), set_id=a_eu, weight=120),
        RecordSet(us, "CNAME", 60, (a_us,), set_id=a_us, weight=120),
        RecordSet(a_eu, "A", 60, ("1.1.1.1",)),
        RecordSet(a_us, "A", 60, ("2.2.2.2",)),
    )


@pytest.fixture
def worked_example() -> tuple[RecordSet, ...]:
    return worked_example_records()
