"""Static records are what they claim to be before anything is written: each value parses as
its type (`gitdns.core.rdata`), each absolute name is a host name, and no name takes the
names of the ownership registry or of gitdns's own TXT records."""

from __future__ import annotations

from collections.abc import Iterable

from gitdns.core.addresses import host_error
from gitdns.core.checks.index import Index, on
from gitdns.core.names import RESERVED_PREFIXES, reserved_prefix
from gitdns.core.problems import Problem
from gitdns.core.rdata import HINTS, value_error


def record_values(ix: Index) -> Iterable[Problem]:
    for doc in ix.state.record_sets:
        for i, record in enumerate(doc.records):
            for j, value in enumerate(record.values):
                wrong = value_error(record.type, value)
                if wrong is None:
                    continue
                code = "InvalidAddress" if record.type in ("A", "AAAA") else "InvalidRecordValue"
                message = f"{record.type} record {record.name!r}: value {wrong}"
                hint = HINTS.get(record.type, "a value of the record's type")
                yield on(ix, doc, ("spec", "records", i, "values", j), message, hint, code)


def record_names(ix: Index) -> Iterable[Problem]:
    for doc in ix.state.record_sets:
        for i, record in enumerate(doc.records):
            path = ("spec", "records", i, "name")
            prefix = reserved_prefix(record.name)
            if prefix is not None:
                message = f"record name {record.name!r} starts with {prefix!r}, a name the ownership registry uses"
                hint = f"names starting with {', '.join(RESERVED_PREFIXES)} are written by gitdns and Kuadrant only"
                yield on(ix, doc, path, message, hint, "ReservedRecordName")
                continue
            wrong = host_error(record.name) if record.name != "@" else None  # '@' outside a zone: reported
            if wrong is not None:
                yield on(ix, doc, path, f"record name {wrong}", "a DNS name such as www.example.com", "InvalidHostname")
