"""YAML documents in, `DesiredState` and schema problems out.

`load` takes ``{relative_path: text}`` (the adapter reads the files) and the JSON schemas by
kind.  Files parse with ruamel.yaml's C loader; each document is checked for its envelope
(apiVersion, kind) and against its kind's schema, and every document that passes becomes a
model object (`gitdns.core.modelbuild`).  Line numbers are recovered (`gitdns.core.locate`)
only for documents with problems.  Each problem names the zones it blocks, so one broken file
holds back only the zones it touches.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from jsonschema import Draft202012Validator
from ruamel.yaml.constructor import SafeConstructor
from ruamel.yaml.cyaml import CParser  # type: ignore[attr-defined]
from ruamel.yaml.error import YAMLError
from ruamel.yaml.resolver import VersionedResolver

from gitdns.core.locate import describe, line_of, quick_check
from gitdns.core.model import API_VERSION, KINDS, DesiredState
from gitdns.core.modelbuild import Doc, ZoneLookup, build, host
from gitdns.core.problems import Problem


@dataclass(frozen=True, slots=True)
class LoadResult:
    state: DesiredState
    problems: list[Problem] = field(default_factory=list)
    # (kind, metadata.name) of documents left out because they did not pass their schema
    rejected: frozenset[tuple[str, str]] = frozenset()


class _FastLoader(CParser, SafeConstructor, VersionedResolver):  # type: ignore[misc]
    """What ``YAML(typ="safe", pure=False)`` builds (libyaml's C parser, the safe constructor,
    YAML 1.2 resolution), except that the resolver table is looked up once per stream instead of
    once per scalar (ruamel finds the version by two failed attribute look-ups each time), which
    halves the time to load a large repository."""

    def __init__(self, stream: str) -> None:
        CParser.__init__(self, stream)
        self._parser = self._composer = self
        SafeConstructor.__init__(self, loader=self)
        VersionedResolver.__init__(self, version=(1, 2), loader=self)
        self._resolvers = VersionedResolver.versioned_resolver.fget(self)  # type: ignore[attr-defined]

    @property
    def versioned_resolver(self) -> Any:
        return self._resolvers


def load(files: Mapping[str, str], schemas: Mapping[str, Mapping[str, Any]]) -> LoadResult:
    """Parse, envelope-check and schema-check every document; build the desired state."""
    validators = {kind: Draft202012Validator(schema) for kind, schema in schemas.items()}
    quick = {kind: quick_check(schema) for kind, schema in schemas.items()}
    problems: list[Problem] = []
    good: list[Doc] = []
    bad: list[tuple[Doc, list[Problem]]] = []
    for file in sorted(files):
        parsed, parse_problem = _parse(file, files[file])
        if parse_problem is not None:
            problems.append(parse_problem)
        for index, line, data in parsed:
            doc, envelope_problem = _envelope(file, index, line, data)
            if doc is None:
                problems.append(_located(files, index, envelope_problem))
                continue
            validator, fast = validators.get(doc.kind), quick.get(doc.kind)
            passed = validator is None or (fast is not None and fast(data))
            errors = [] if passed else list(validator.iter_errors(data))  # type: ignore[union-attr]
            found = [envelope_problem] if envelope_problem else [p for e in errors for p in describe(file, e)]
            if found:
                bad.append((doc, found))
            else:
                good.append(doc)
    state, lookup = _build(good, bad)
    for doc, found in bad:
        zones = _raw_zones(doc, lookup, state)
        for problem in found:
            blocked = replace(problem, zones=zones or (), blocks_all=zones is None)
            problems.append(_located(files, doc.index, blocked))
    rejected = frozenset((doc.kind, doc.name) for doc, _ in bad if doc.name)
    return LoadResult(state, problems, rejected)


def _located(files: Mapping[str, str], index: int, problem: Problem | None) -> Problem:
    assert problem is not None
    return replace(problem, line=line_of(files[problem.file], index, problem.path) or problem.line)


def _parse(file: str, text: str) -> tuple[list[tuple[int, int, Any]], Problem | None]:
    """(index, first line, data) of every non-empty document, or the problem that stopped it."""
    docs: list[tuple[int, int, Any]] = []
    try:
        loader = _FastLoader(text)
        try:
            index = 0
            while loader.check_node():
                node = loader.get_node()
                data = loader.construct_document(node)
                if data is not None:
                    docs.append((index, node.start_mark.line + 1, data))
                index += 1
        finally:
            loader.dispose()
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        problem = Problem(
            file,
            (),
            f"the file is not valid YAML: {what}",
            hint="fix the YAML syntax; documents in this file are ignored until then",
            line=mark.line + 1 if mark is not None else 0,
            blocks_all=True,
            code="ParseError",
        )
        return [], problem
    return docs, None


def _envelope(file: str, index: int, line: int, data: Any) -> tuple[Doc | None, Problem | None]:
    """Check apiVersion and kind.  No doc: the kind is unknown and so are the zones it touches."""
    if not isinstance(data, dict):
        hint = "write a mapping with apiVersion, kind, metadata and spec"
        return None, _whole(file, (), "a document must be a mapping", hint, line, "InvalidDocument")
    kind = data.get("kind")
    kinds = ", ".join(KINDS)
    if kind is None:
        return None, _whole(file, (), "the document has no kind", f"add kind: one of {kinds}", line, "NoKind")
    if kind not in KINDS:
        close = [k for k in KINDS if str(kind).lower() == k.lower()]
        close = close or difflib.get_close_matches(str(kind), KINDS, n=1)
        hint = f"did you mean {close[0]}?" if close else f"use one of {kinds}"
        return None, _whole(file, ("kind",), f"unknown kind {kind!r}", hint, line, "UnknownKind")
    metadata = data.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    doc = Doc(file, index, line, kind, name if isinstance(name, str) else None, data)
    api = data.get("apiVersion")
    if api == API_VERSION:
        return doc, None
    message = "the document has no apiVersion" if api is None else f"unsupported apiVersion {api!r}"
    hint = f"use apiVersion: {API_VERSION}"
    return doc, Problem(file, ("apiVersion",), message, hint=hint, line=line, code="WrongApiVersion")


def _whole(file: str, path: tuple[str, ...], message: str, hint: str, line: int, code: str) -> Problem:
    return Problem(file, path, message, hint=hint, line=line, blocks_all=True, code=code)


# --- zones a rejected document blocks --------------------------------------------------------


def _dig(data: Any, *keys: str) -> Any:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _raw_hosts(doc: Doc, state: DesiredState) -> list[str]:
    spec = doc.body.get("spec")
    if doc.kind == "Cluster":
        gateways = _list(_dig(spec, "gateways"))
        listeners = [ls for g in gateways if isinstance(g, dict) for ls in _list(g.get("listeners"))]
        return [host(h) for ls in listeners for h in _strings(_dig(ls, "hostname"))]
    if doc.kind == "DNSPolicy":
        hosts = [host(h) for h in _strings(_dig(spec, "targetRef", "hosts"))]
        gateway, namespace = _dig(spec, "targetRef", "gateway"), _dig(spec, "targetRef", "namespace")
        return hosts + [
            ls.hostname
            for c in state.clusters
            for g in c.gateways
            if g.name == gateway and namespace in (None, g.namespace)
            for ls in g.listeners
        ]
    if doc.kind == "Tenant":
        return [host(h) for h in _strings(_dig(spec, "domains"))]
    if doc.kind == "NodePool":
        return [d for t in state.tenants if t.node_pool == doc.name for d in t.domains]
    if doc.kind == "RecordSet":
        names = [_dig(r, "name") for r in _list(_dig(spec, "records"))]
        return [host(n) for n in names if isinstance(n, str)]
    return []


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _raw_zones(doc: Doc, lookup: ZoneLookup, state: DesiredState) -> tuple[str, ...] | None:
    """The zones a rejected document touches; None when they cannot be known (blocks all)."""
    spec = doc.body.get("spec")
    if doc.kind == "Zone":
        return (doc.name,) if doc.name else None
    if doc.kind == "ActiveGroups":
        zone = _dig(spec, "zone")
        return (zone,) if isinstance(zone, str) else None
    zones = set(lookup.zones_of(_raw_hosts(doc, state)))
    zone = _dig(spec, "zone")
    if doc.kind == "RecordSet" and isinstance(zone, str):
        zones.add(zone)
    return tuple(sorted(zones))


# --- the desired state: model objects (gitdns.core.modelbuild) and every Zone's domain ------


def _build(good: list[Doc], bad: list[tuple[Doc, list[Problem]]]) -> tuple[DesiredState, ZoneLookup]:
    raw_zones = [d for d in good if d.kind == "Zone"] + [d for d, _ in bad if d.kind == "Zone"]
    domains: dict[str, str] = {}
    for doc in raw_zones:
        domain = _dig(doc.body, "spec", "domain")
        if doc.name and isinstance(domain, str):
            domains.setdefault(doc.name, host(domain))
    lookup = ZoneLookup((name, domain) for name, domain in domains.items())
    return build(good, domains, lookup), lookup
