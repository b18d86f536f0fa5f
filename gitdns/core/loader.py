"""YAML documents in, `DesiredState` and schema problems out.

`load` takes ``{relative_path: text}`` (the adapter reads the files, within the caps of
`gitdns.core.limits`; a file it did not read is an `Unread`, and a problem here) and the JSON
schemas by kind.  Files parse into plain data straight from libyaml's events
(`gitdns.core.yamlparse`: no aliases, no merge keys, bounded nesting); each document is
checked for its envelope (apiVersion, kind) and against its kind's schema (at most
`MAX_SCHEMA_PROBLEMS` problems a document), and every document that passes becomes a model
object (`gitdns.core.model.build`).  Line numbers are found (`gitdns.core.yamlparse.lines`) only for
documents with problems, in one pass per file.  Each problem names the zones it blocks, so one
broken file holds back only the zones it touches.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import Any

from ruamel.yaml.error import YAMLError

from gitdns.core.blobcache import FileEntry, Outcome, ValidationCache, blob_id
from gitdns.core.limits import Unread
from gitdns.core.locate import describe
from gitdns.core.model import API_VERSION, KINDS, DesiredState
from gitdns.core.model.build import Doc, ZoneLookup, assemble, build_one, host
from gitdns.core.patterns import schema_validator
from gitdns.core.problems import Problem, clipped, shown
from gitdns.core.quickschema import quick_check
from gitdns.core.yamlparse import Document, StandIn, StandInKey, parse
from gitdns.core.yamlparse.lines import lines

MAX_SCHEMA_PROBLEMS = 20  # a document's schema problems listed; the rest are counted out
_MORE = f"more schema problems in this document are not listed (the first {MAX_SCHEMA_PROBLEMS} are)"


@dataclass(frozen=True, slots=True)
class LoadResult:
    state: DesiredState
    problems: list[Problem] = field(default_factory=list)
    # (kind, metadata.name) of documents left out because they did not pass their schema
    rejected: frozenset[tuple[str, str]] = frozenset()


ParseMemo = dict[tuple[str, str], tuple[list[Document], Problem | None]]
"""(file, text) -> what `_parse` made of it: for a caller loading many trees that share files
(`gitdns history`), whose loaded states are only read."""

_COMPILED: dict[int, tuple[Mapping[str, Any], Any, Any]] = {}  # id(schema) -> (schema, validator, quick check)


def _compiled(schema: Mapping[str, Any]) -> tuple[Any, Any]:
    """The validator and the quick check of ``schema``, compiled once per schema object."""
    found = _COMPILED.get(id(schema))
    if found is None or found[0] is not schema:
        if len(_COMPILED) >= 64:
            _COMPILED.clear()
        found = _COMPILED[id(schema)] = (schema, schema_validator(schema), quick_check(schema))  # patterns whole
    return found[1], found[2]


def load(files: Mapping[str, str], schemas: Mapping[str, Mapping[str, Any]],
         memo: ParseMemo | ValidationCache | None = None,
         blob_ids: Mapping[str, str] | None = None) -> LoadResult:
    """Parse, envelope-check and schema-check every document; build the desired state.  With
    a `ParseMemo`, a file already parsed with the same text is not parsed again; with a
    `ValidationCache`, a file already loaded with the same blob id (``blob_ids``, by path, when
    the caller knows them from the tree; else `blob_id` of its text) is neither parsed nor
    checked again, and gives the same model objects."""
    cache = memo if isinstance(memo, ValidationCache) else None
    parses = memo if isinstance(memo, dict) else None
    if cache is not None:
        cache.begin(schemas)
    compiled = {kind: _compiled(schema) for kind, schema in schemas.items()}
    problems: list[Problem] = []
    to_locate: list[tuple[int, Problem]] = []  # (document index, problem) whose line is its path's
    good: list[tuple[Doc, FileEntry | None]] = []
    bad: list[tuple[Doc, list[Problem]]] = []
    for file in sorted(files):
        text = files[file]
        entry: FileEntry | None = None
        if cache is not None and not isinstance(text, Unread):
            blob = blob_ids.get(file) if blob_ids is not None else None
            blob = blob or blob_id(text)
            entry = cache.get(file, blob)
            if entry is None:
                entry = _file_entry(file, text, compiled, None)
                cache.put(file, blob, entry)
            parse_problem, outcomes = entry.parse_problem, entry.outcomes
        else:
            parse_problem, outcomes = _outcomes(file, text, compiled, parses)
        if parse_problem is not None:
            problems.append(parse_problem)
        for outcome in outcomes:
            doc = outcome.doc
            if doc is None:
                if outcome.placed:
                    problems.extend(outcome.problems)
                else:
                    to_locate.extend((outcome.index, p) for p in outcome.problems)
            elif outcome.problems:
                bad.append((doc, list(outcome.problems)))
            else:
                good.append((doc, entry))
    state, lookup = _build(good, bad)
    if cache is not None:
        cache.sweep()
    for doc, found in bad:
        unknown = (found[0].code in _PLACED and _names_zones_by_alias(doc)) or _naming_broken(doc, found)
        zones = None if unknown else _raw_zones(doc, lookup, state)
        for problem in found:
            blocked = replace(problem, zones=zones or (), blocks_all=zones is None)
            if problem.code in _PLACED:
                problems.append(blocked)
            else:
                to_locate.append((doc.index, blocked))
    problems.extend(_located(files, to_locate))
    rejected = frozenset((doc.kind, doc.name) for doc, _ in bad if doc.name)
    return LoadResult(state, problems, rejected)


Compiled = Mapping[str, tuple[Any, Any]]  # kind -> (validator, quick check)


def _file_entry(file: str, text: str, compiled: Compiled, parses: ParseMemo | None) -> FileEntry:
    parse_problem, outcomes = _outcomes(file, text, compiled, parses)
    return FileEntry(parse_problem, outcomes)


def _outcomes(file: str, text: str, compiled: Compiled,
              parses: ParseMemo | None) -> tuple[Problem | None, tuple[Outcome, ...]]:
    """One file: its parse problem, and what each of its documents is (envelope and schema)."""
    if parses is None or isinstance(text, Unread):
        parsed, parse_problem = _parse(file, text)
    else:
        key = (file, text)
        known = parses.get(key)
        if known is None:
            known = parses[key] = _parse(file, text)
        parsed, parse_problem = known
    outcomes: list[Outcome] = []
    for parsed_doc in parsed:
        index, line, data = parsed_doc.index, parsed_doc.line, parsed_doc.data
        doc, envelope_problem = _envelope(file, index, line, data)
        if parsed_doc.refused is not None:
            refused = _refused(file, parsed_doc)
            if doc is None:
                outcomes.append(Outcome(index, None, (replace(refused, blocks_all=True),), placed=True))
            else:
                outcomes.append(Outcome(index, doc, (refused,)))
            continue
        if doc is None:
            outcomes.append(Outcome(index, None, (_known(envelope_problem),)))
            continue
        validator, fast = compiled.get(doc.kind, (None, None))
        passed = validator is None or (fast is not None and fast(data))
        found = [envelope_problem] if envelope_problem else [] if passed else _schema_problems(
            file, validator, data)
        outcomes.append(Outcome(index, doc, tuple(found)))
    return parse_problem, tuple(outcomes)


def _known(problem: Problem | None) -> Problem:
    assert problem is not None
    return problem


def _schema_problems(file: str, validator: Any, data: Any) -> list[Problem]:
    """At most `MAX_SCHEMA_PROBLEMS` problems (one more says the rest are not listed)."""
    errors = list(islice(validator.iter_errors(data), MAX_SCHEMA_PROBLEMS + 1))
    found = [p for e in errors[:MAX_SCHEMA_PROBLEMS] for p in describe(file, e)]
    if len(errors) > MAX_SCHEMA_PROBLEMS:
        found.append(Problem(file, (), _MORE, hint="fix these and validate again", code="SchemaViolation"))
    return found


def _located(files: Mapping[str, str], pending: list[tuple[int, Problem]]) -> list[Problem]:
    """Each problem at the line of its path (one pass over each file that has some)."""
    by_file: dict[str, list[tuple[int, Problem]]] = {}
    for index, problem in pending:
        by_file.setdefault(problem.file, []).append((index, problem))
    out: list[Problem] = []
    for file, items in by_file.items():
        found = lines(files[file], [(index, problem.path) for index, problem in items])
        out.extend(replace(p, line=found.get((i, p.path), 0) or p.line) for i, p in items)
    return out


def _parse(file: str, text: str) -> tuple[list[Document], Problem | None]:
    """Every non-empty document, or the problem that stopped the file (and the documents
    before it are dropped: a file counts whole or not at all)."""
    if isinstance(text, Unread):
        return [], Problem(file, (), text.message, hint=text.hint, blocks_all=text.blocks_all, code=text.code)
    try:
        return parse(text, finite=True), None
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        what = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        line = mark.line + 1 if mark is not None else _line_at(text, getattr(exc, "position", None))
    except UnicodeEncodeError as exc:  # a lone surrogate: no file read as UTF-8 holds one, a caller's text may
        what = f"the character {exc.object[exc.start]!r} is no Unicode scalar value"
        line = _line_at(text[: exc.start].encode("utf-8", "surrogatepass"), None)
    problem = Problem(
        file,
        (),
        f"the file is not valid YAML: {clipped(str(what))}",
        hint="fix the YAML syntax; documents in this file are ignored until then",
        line=line,
        blocks_all=True,
        code="ParseError",
    )
    return [], problem


_BREAKS = re.compile("\r\n|[\r\n\x85\u2028\u2029]")  # line breaks, as libyaml counts lines


def _line_at(text: str | bytes, offset: int | None) -> int:
    """The line of the UTF-8 byte ``offset`` of ``text`` (the whole of it when None): where
    libyaml's reader stopped (an unacceptable character carries no mark, only its offset)."""
    if offset is None and isinstance(text, str):
        return 0
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    head = data[:offset].decode("utf-8", "replace")
    return len(_BREAKS.findall(head)) + 1


_REFUSED_HINTS = {"AliasRefused": "write the value out where it is used", "MergeKeyRefused": "write the keys out",
                  "NonFiniteNumber": "write a finite number (the field's description says its range)"}
_PLACED = frozenset(_REFUSED_HINTS)  # problems whose line is known already


def _refused(file: str, doc: Document) -> Problem:
    assert doc.refused is not None
    hint = f"{_REFUSED_HINTS[doc.refused.code]}; until then the document is left out and the zones it touches are held"
    return Problem(file, doc.refused.path, doc.refused.message, hint=hint, line=doc.refused.line,
                   code=doc.refused.code)


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
        said = kind if isinstance(kind, str) and len(kind) <= 64 else ""
        close = [k for k in KINDS if said.lower() == k.lower()]
        close = close or difflib.get_close_matches(said, KINDS, n=1)
        hint = f"did you mean {close[0]}?" if close else f"use one of {kinds}"
        return None, _whole(file, ("kind",), f"unknown kind {shown(kind)}", hint, line, "UnknownKind")
    metadata = data.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    doc = Doc(file, index, line, kind, name if isinstance(name, str) else None, data)
    api = data.get("apiVersion")
    if api == API_VERSION:
        return doc, None
    message = "the document has no apiVersion" if api is None else f"unsupported apiVersion {shown(api)}"
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
    if not zones and doc.kind in ("DNSPolicy", "RecordSet"):
        return None  # it names no host of any zone (a gateway no cluster has, names outside every zone)
    return tuple(sorted(zones))


def _naming_broken(doc: Doc, found: list[Problem]) -> bool:
    """Whether a problem is where the document names the zones it touches, or above it (a field
    missing, a mapping of another shape): then they cannot be read from it.  A RecordSet with a
    ``spec.zone`` names its zone there alone."""
    names = _NAMING.get(doc.kind, ())
    if doc.kind == "RecordSet" and isinstance(_dig(doc.body, "spec", "zone"), str):
        names = (("spec", "zone"),)
    return any(all(f == "*" or f == p for f, p in zip(name, problem.path, strict=False))
               for problem in found if problem.code not in _PLACED and problem.message != _MORE for name in names)


# where each kind names the zones it touches (what `_raw_zones` reads; "*": every item)
_ZONE_FIELDS: dict[str, tuple[tuple[str, ...], ...]] = {
    "Zone": (("metadata", "name"),),
    "NodePool": (("metadata", "name"),),
    "ActiveGroups": (("spec", "zone"),),
    "RecordSet": (("spec", "zone"), ("spec", "records", "*", "name")),
    "Cluster": (("spec", "gateways", "*", "listeners", "*", "hostname"),),
    "DNSPolicy": (("spec", "targetRef"),),
    "Tenant": (("spec", "domains"),),
}


# ... and what says which zones they are: a Cluster whose name or id cannot be read may be any
# cluster (whose agent would take itself for removed from git and clean its zones up)
_NAMING: dict[str, tuple[tuple[str, ...], ...]] = {
    **{kind: fields for kind, fields in _ZONE_FIELDS.items() if kind not in ("Tenant", "NodePool")},
    "Cluster": (*_ZONE_FIELDS["Cluster"], ("metadata", "name"), ("spec", "id")),
}


def _names_zones_by_alias(doc: Doc) -> bool:
    """Whether an alias stood where ``doc`` names its zones (then they cannot be known)."""
    return any(_stand_in_at(doc.body, path) for path in _ZONE_FIELDS.get(doc.kind, ()))


def _stand_in_at(value: Any, path: tuple[str, ...]) -> bool:
    if isinstance(value, StandIn):
        return True
    if not path:
        return _holds_stand_in(value)
    head, rest = path[0], path[1:]
    if head == "*":
        return isinstance(value, list) and any(_stand_in_at(item, rest) for item in value)
    return isinstance(value, dict) and _stand_in_at(value.get(head), rest)


def _holds_stand_in(value: Any) -> bool:
    if isinstance(value, StandIn):
        return True
    if isinstance(value, dict):
        return any(isinstance(k, StandInKey) or _holds_stand_in(v) for k, v in value.items())
    return isinstance(value, list) and any(_holds_stand_in(item) for item in value)


# --- the desired state: model objects (gitdns.core.model.build) and every Zone's domain ------


def _build(good: list[tuple[Doc, FileEntry | None]],
           bad: list[tuple[Doc, list[Problem]]]) -> tuple[DesiredState, ZoneLookup]:
    """The model objects of the documents ``good`` (each kept in its file's cache entry, when it
    has one: a RecordSet's by the Zones' domains too) and the lookup of every Zone's domain."""
    raw_zones = [d for d, _ in good if d.kind == "Zone"] + [d for d, _ in bad if d.kind == "Zone"]
    domains: dict[str, str] = {}
    for doc in raw_zones:
        domain = _dig(doc.body, "spec", "domain")
        if doc.name and isinstance(domain, str):
            domains.setdefault(doc.name, host(domain))
    lookup = ZoneLookup((name, domain) for name, domain in domains.items())
    domains_key = tuple(domains.items())
    objects: list[object] = []
    for doc, entry in good:
        if entry is None:
            objects.append(build_one(doc, domains, lookup))
            continue
        key = (doc.index, domains_key if doc.kind == "RecordSet" else ())
        obj = entry.built.get(key)
        if obj is None:
            assert doc.body, "a document's parsed data is let go only once its object is built"
            if doc.kind == "RecordSet":  # built against other domains before: those are stale
                for stale in [k for k in entry.built if k[0] == doc.index]:
                    del entry.built[stale]
            obj = entry.built[key] = build_one(doc, domains, lookup)
        objects.append(obj)
    return assemble([d.kind for d, _ in good], objects), lookup
