"""``gitdns import``: the records of a zone you have, as RecordSet YAML for a repository.

The source is the zone's provider as its Zone in the repository configures it (``--from
provider``: rfc2136 by AXFR, route53, google, azure, local) or an RFC 1035 master file.  What is
taken and what is left, with why, is `gitdns.core.importing`'s; this module reads the source,
writes the files (never over an existing one without ``--force``, each atomically) and reports.
Nothing is written to the zone.  The report goes to stderr when the YAML goes to stdout, so
``gitdns import ... > records.yaml`` holds only YAML.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gitdns.commands import EXIT_ERROR, EXIT_OK, Result
from gitdns.core.importing import order
from gitdns.core.limits import MAX_FILE_BYTES, size_text
from gitdns.core.records import ZoneSnapshot, normalize_name
from gitdns.errors import ConfigError
from gitdns.providers.fences import STRICT, Fences

if TYPE_CHECKING:
    from gitdns.core.importing import Document, Sorted
    from gitdns.core.model import Zone

PROVIDER = "provider"
STDIN = "-"
SHOWN_PER_OWNER = 5  # names shown per managing owner in the text report (all of them in JSON)

Step = Callable[[int, int, str], None]  # (done, total, what): the terminal's progress line


@dataclass(frozen=True, slots=True)
class Request:
    zone: str
    source: str
    repo: Path | None = None
    out: Path | None = None
    split: bool = False
    name: str | None = None
    force: bool = False
    fmt: str = "yaml"


def _no_step(done: int, total: int, what: str) -> None:
    return None


def _zone_of(req: Request, fences: Fences) -> tuple[Zone | None, str, dict[str, str], Path]:
    """The repository's Zone (when there is a repository to look in), the domain, the owner
    ids git knows (id -> Cluster name) and the repository's path."""
    from gitdns.commands.zones import find_zone, need_zone
    from gitdns.reconcile.engine import load

    if req.repo is None and req.source != PROVIDER:
        return None, _domain(req.zone), {}, Path(".")
    repo = req.repo if req.repo is not None else Path(".")
    desired = load(repo)
    names = {c.id: c.name for c in desired.state.clusters}
    if req.source == PROVIDER:
        configured = need_zone(desired, req.zone, repo)
        return configured, configured.domain, names, repo
    found = find_zone(desired, req.zone)
    return found, found.domain if found is not None else _domain(req.zone), names, repo


def _domain(text: str) -> str:
    from gitdns.core.addresses import host_error

    domain = normalize_name(text)
    wrong = host_error(domain) if domain else "it is empty"
    if wrong is not None or "." not in domain:
        raise ConfigError(f"zone {text!r}: not a zone domain ({wrong or 'one label'}); give the domain "
                          "(example.com), or a Zone's metadata.name with --repo")
    return domain


def _read(req: Request, zone: Zone | None, domain: str, repo: Path, fences: Fences) -> ZoneSnapshot:
    if req.source == PROVIDER:
        from gitdns.reconcile.engine import default_factory

        assert zone is not None  # _zone_of found it in the repository, loaded once
        provider = default_factory(repo, fences=fences)(zone)
        return provider.read(domain)
    from gitdns.providers.masterfile import read_master_file

    if req.source == STDIN:
        return read_master_file(sys.stdin.read(), domain, "<stdin>")
    path = Path(req.source)
    if not path.is_file():
        raise ConfigError(f"--from {req.source}: no such file (give 'provider' for the Zone's provider, "
                          "or the path of an RFC 1035 master file)")
    size = path.stat().st_size
    if size > 256 * 1024 * 1024:
        raise ConfigError(f"--from {req.source}: {size_text(size)}, more than a master file import takes")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"--from {req.source}: byte {exc.start} is not UTF-8; a master file is text") from None
    return read_master_file(text, domain, str(path))


IMPORT_FILE = "\x00gitdns-import.yaml"  # the imported documents' place among the repository's files
VET_ROUNDS = 5  # taking a record out can leave another alone (a CNAME loop): vet again, this often


def files_for(repo: Path | None, domain: str, replaced: Path | None = None) -> dict[str, str]:
    """The files the imported documents are checked beside: the repository's, or a Zone of
    their own without one.  The files ``replaced`` (the --out file, or the --split directory)
    are left out: the import takes their place."""
    from gitdns.adapters.repo import read_tree

    if repo is not None:
        files = dict(read_tree(repo))
        if replaced is not None:
            gone = replaced.resolve()
            root = repo.resolve()
            files = {rel: text for rel, text in files.items()
                     if not ((root / rel).resolve() == gone or gone in (root / rel).resolve().parents)}
        return files
    return {"zone.yaml": "apiVersion: gitdns.io/v1alpha1\nkind: Zone\nmetadata: {name: imported}\n"
                         f"spec:\n  domain: {domain}\n  provider: {{type: local}}\n"}


def vet(sorted_: Sorted, files: dict[str, str], zone_name: str | None, domain: str, base: str,
        checked: list[str] | None = None) -> list[str]:
    """The one gate: what is imported must validate where it goes.  The documents are
    checked beside ``files`` (`files_for`) by the same validation `gitdns validate` runs; each
    record a problem points at is moved to ``refused`` with that problem's message (apex CNAME,
    CNAME beside other data or in a loop, a name a DNSPolicy publishes, ...).  Returns the
    problems of the documents as a whole (e.g. a RecordSet name the repository already uses),
    which no record removal mends.  ``checked`` gets the text that passed (one document, as
    a whole-zone import writes it), so that it is not written out twice."""
    from gitdns.adapters.repo import check_files as check
    from gitdns.adapters.repo import load_schemas
    from gitdns.core.builder import static_records
    from gitdns.core.importing import Refused, documents
    from gitdns.core.loader import ParseMemo
    from gitdns.core.yamlparse import Document as Parsed

    schemas = load_schemas()
    memo: ParseMemo = {}  # the repository's files are parsed once, whatever the rounds
    if zone_name is not None:
        state = check(files, schemas, memo).state
        zone = state.zone(zone_name)
        if zone is not None:
            sorted_.drop_present(r.key for r in static_records(state, zone))
    for _ in range(VET_ROUNDS):
        if not sorted_.records:
            return []
        docs = documents(sorted_.records, domain, zone_name, base)
        text = files[IMPORT_FILE] = _yaml_text(docs, domain)
        # the documents are checked as the data they are, not parsed back from their text: the
        # text loads as exactly this data (tests/commands/test_import.py proves it for any zone);
        # a problem's line is still found in the text
        memo[(IMPORT_FILE, text)] = ([Parsed(index=0, line=2, data=docs[0].body)], None)
        problems = [p for p in check(files, schemas, memo).problems if p.file == IMPORT_FILE]
        bad: dict[int, str] = {}
        whole: list[str] = []
        for problem in problems:
            path = tuple(problem.path)
            if len(path) >= 3 and path[:2] == ("spec", "records") and isinstance(path[2], int):
                bad.setdefault(path[2], problem.message)
            else:
                whole.append(f"{problem.message}" + (f" ({problem.hint})" if problem.hint else ""))
        if whole:
            return whole
        if not bad:
            if checked is not None:
                checked.append(files[IMPORT_FILE])
            return []
        kept = []
        for i, rec in enumerate(sorted(sorted_.records, key=order)):
            if i in bad:
                sorted_.refused.append(Refused(rec.key, f"does not validate: {bad[i]}"))
            else:
                kept.append(rec)
        sorted_.records = kept
    return [f"the imported records still do not validate after {VET_ROUNDS} rounds of taking out those that do not"]


def _yaml_text(docs: list[Document], domain: str) -> str:
    from gitdns.core.importing import yaml_text

    return yaml_text(docs, f"gitdns import of zone {domain}: TTLs as read")


def _targets(req: Request, docs: list[Document]) -> list[tuple[Path, Document]]:
    if req.out is None:
        return []
    if not req.split:
        return [(req.out, doc) for doc in docs]
    return [(req.out / f"{doc.stem}.yaml", doc) for doc in docs]


def _write(req: Request, docs: list[Document], domain: str, whole: str | None) -> tuple[list[str], str | None]:
    """Write the files; (paths written, or why nothing was)."""
    from gitdns.fsutil import write_atomic

    if req.out is None or not docs:  # nothing to import: no file, not even an empty one
        return [], None
    if req.split and req.out.exists() and not req.out.is_dir():
        return [], f"--out {req.out}: not a directory (--split writes one file per name prefix into a directory)"
    if not req.split and req.out.is_dir():
        return [], f"--out {req.out}: a directory; give a file, or --split for one file per name prefix"
    targets = _targets(req, docs)
    texts = {path: _yaml_text([doc], domain) for path, doc in targets} if req.split else \
        {req.out: whole if whole is not None else _yaml_text(docs, domain)}
    existing = [str(p) for p in texts if p.exists()]
    if existing and not req.force:
        return [], f"{', '.join(existing)}: exists; nothing written (--force overwrites)"
    big = [f"{p} ({size_text(len(t.encode()))})" for p, t in texts.items() if len(t.encode()) > MAX_FILE_BYTES]
    if big:
        return [], (f"{', '.join(big)}: larger than the {size_text(MAX_FILE_BYTES)} a desired-state file may have "
                    "(the readers' maxFileBytes); nothing written: use --split")
    try:
        for path, text in texts.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, text.encode())
    except OSError as exc:
        return [], f"--out {req.out}: cannot write ({exc.strerror or exc})"
    return [str(p) for p in texts], None


def _report_json(req: Request, sorted_: Sorted, docs: list[Document], written: list[str]) -> str:
    body: dict[str, object] = {
        "zone": sorted_.zone,
        "source": req.source,
        "imported": len(sorted_.records),
        "managed": {owner: [{"name": k.name, "type": k.type, **({"setIdentifier": k.set_id} if k.set_id else {})}
                            for k in keys] for owner, keys in sorted(sorted_.managed.items())},
        "provider": [{"name": k.name, "type": k.type} for k in sorted_.provider],
        "inRepository": [{"name": k.name, "type": k.type} for k in sorted_.present],
        "notImported": [{"name": r.key.name, "type": r.key.type, "why": r.why,
                         **({"setIdentifier": r.key.set_id} if r.key.set_id else {})} for r in sorted_.refused],
    }
    if written:
        body["files"] = written
    else:
        body["documents"] = [d.body for d in docs]
    return json.dumps(body, indent=2, sort_keys=True)


def _report_lines(req: Request, sorted_: Sorted, written: list[str]) -> list[str]:
    where = (", ".join(written) if len(written) < 4 else f"{len(written)} files under {req.out}") if written else \
        "standard output" if req.out is None else "no file (nothing to write)"
    lines = [f"imported {len(sorted_.records)} record set(s) of {sorted_.zone} from {req.source} into {where}"]
    for owner, keys in sorted(sorted_.managed.items()):
        shown = ", ".join(str(k) for k in keys[:SHOWN_PER_OWNER]) + (", ..." if len(keys) > SHOWN_PER_OWNER else "")
        lines.append(f"managed by {owner}: {len(keys)} record set(s), not imported ({shown}); "
                     "its ownership TXT are not data")
    if sorted_.present:
        shown = ", ".join(str(k) for k in sorted_.present[:SHOWN_PER_OWNER])
        more = ", ..." if len(sorted_.present) > SHOWN_PER_OWNER else ""
        lines.append(f"already in the repository's RecordSets: {len(sorted_.present)} record set(s), "
                     f"not imported again ({shown}{more})")
    if sorted_.provider:
        lines.append(f"left to the provider: {', '.join(str(k) for k in sorted_.provider)} (and the SOA)")
    if sorted_.refused:
        lines.append(f"not imported: {len(sorted_.refused)} record set(s):")
        lines.extend(f"  {r.line()}" for r in sorted_.refused)
    return lines


def import_zone(req: Request, *, fences: Fences = STRICT, step: Step = _no_step) -> Result:
    """Read the zone, sort it (`gitdns.core.importing.sort_zone`), write or print the
    RecordSet documents and report what was left and why."""
    from gitdns.core.importing import documents, resource_name, sort_zone
    from gitdns.core.providertypes import PROVIDER_TYPES, capabilities_of

    if req.split and req.out is None:
        return Result(EXIT_ERROR, err=["--split writes one file per name prefix: give --out DIR"])
    zone, domain, owner_names, repo = _zone_of(req, fences)
    step(0, 3, f"reading {domain}")
    snapshot = _read(req, zone, domain, repo, fences)
    target = zone.provider.type if zone is not None and zone.provider.type else "local"
    types = capabilities_of(target if target in PROVIDER_TYPES else "local").record_types
    step(1, 3, f"sorting {len(snapshot.records)} record sets")
    sorted_ = sort_zone(snapshot, types=types, target=target, names=owner_names)
    base = req.name or (zone.name if zone is not None else resource_name(domain.replace(".", "-")))
    files = files_for(repo if req.repo is not None or req.source == PROVIDER else None, domain, req.out)
    checked: list[str] = []
    whole = vet(sorted_, files, zone.name if zone is not None else None, domain, base, checked)
    if whole:
        return Result(EXIT_ERROR, err=[f"the imported RecordSet would not validate: {w}" for w in whole]
                      + ["nothing written (--name NAME gives the RecordSet another name)"])
    sorted_.refused.sort(key=lambda r: (r.key.name, r.key.type, r.key.set_id))
    docs = documents(sorted_.records, domain, zone.name if zone is not None else None, base, req.split)
    step(2, 3, f"writing {len(docs)} document(s)")
    text = checked[0] if checked and not req.split else None  # the one document vet checked is this text
    written, refused = _write(req, docs, domain, text)
    step(3, 3, "done")
    if refused is not None:
        return Result(EXIT_ERROR, err=[refused])
    result = Result(EXIT_OK)
    if req.fmt == "json":
        result.block(_report_json(req, sorted_, docs, written))
        return result
    if req.out is None and docs:
        result.block((text if text is not None else _yaml_text(docs, domain)).rstrip("\n"))
    result.err.extend(_report_lines(req, sorted_, written))
    return result
