"""A zone's owners: ``gitdns owners`` (list them with their kind, records and heartbeats, and
whether git knows them), ``gitdns prune-owner`` (remove a dead cluster's records and ownership
TXT) and ``gitdns adopt`` (take over foreign records)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from gitdns.commands import EXIT_ERROR, EXIT_OK, Result
from gitdns.commands.zones import zone_and_provider
from gitdns.core.records import RecordKey, ZoneSnapshot
from gitdns.providers.fences import STRICT, Fences

Ask = Callable[[str, str], bool]  # (text to show first, question) -> yes


def _key_text(key: RecordKey) -> str:
    return f"{key.name} {key.type}" + (f" set={key.set_id}" if key.set_id else "")


def owners(repo: Path, zone_ident: str, fmt: str = "text", *, fences: Fences = STRICT) -> Result:
    """Every owner of a zone: kind (gitdns, dns-operator, legacy, unknown), the Cluster git
    names for it, its records, groups and last heartbeat."""
    from gitdns.core.owner.zone import owners as owner_rows
    from gitdns.reconcile.engine import load

    desired = load(repo)
    zone, provider = zone_and_provider(desired, zone_ident, repo, fences)
    names = {c.id: c.name for c in desired.state.clusters}
    rows = owner_rows(provider.read(zone.domain), set(names))
    result = Result()
    if fmt == "json":
        result.block(json.dumps([{"owner": r.owner, "kind": r.kind.value, "cluster": names.get(r.owner),
                                 "records": r.records,
                                 "recordSets": [{"name": k.name, "type": k.type,
                                                 **({"setIdentifier": k.set_id} if k.set_id else {})}
                                                for k in r.keys],
                                 "orphanTxt": r.orphans, "sharedWith": list(r.shared_with),
                                 "groups": list(r.groups), "revisions": list(r.revisions),
                                 "heartbeat": r.heartbeat, "knownToGit": r.known} for r in rows],
                               indent=2, sort_keys=True))
        return result
    result.line(f"zone {zone.domain}: {len(rows)} owner(s)")
    for r in rows:
        beat = datetime.fromtimestamp(r.heartbeat, UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if r.heartbeat else "never"
        who = names.get(r.owner, "NOT IN GIT")
        extra = f"  orphan-txt={r.orphans}" if r.orphans else ""
        extra += f"  shares-legacy-txt-with={','.join(r.shared_with)}" if r.shared_with else ""
        result.line(f"{r.owner}  {who}  kind={r.kind.value}  records={r.records}  "
                    f"groups={','.join(r.groups) or '-'}  heartbeat={beat}{extra}")
        result.lines([f"  {_key_text(key)}" for key in r.keys])
    return result


def prune_owner(repo: Path, owner: str, zone_ident: str, *, force: bool = False, ask: Ask | None = None,
                fences: Fences = STRICT, from_worktree: bool = False) -> Result:
    """Remove ``owner``'s values and ownership TXT from the zone, then its heartbeat.  ``ask``
    shows the plan and asks before writing (None: no question, as ``--yes``).  Committed,
    merged state only unless ``from_worktree`` (`gitdns.commands.committed`)."""
    from dataclasses import replace

    from gitdns.commands.committed import acting_on
    from gitdns.core.plan import fmt as planfmt
    from gitdns.core.plan.leave import heartbeat_removal
    from gitdns.core.plan.planner import plan as make_plan
    from gitdns.core.plan.values import Intent
    from gitdns.reconcile.engine import load, policy_for_zone

    acting = acting_on(repo, from_worktree=from_worktree)
    desired = load(repo)
    zone, provider = zone_and_provider(desired, zone_ident, repo, fences)
    named = desired.state.cluster(owner)
    if named is not None and not force:
        return Result(EXIT_ERROR, err=[f"owner {owner} is Cluster {named.name} in git: remove it from git instead "
                                       "(its agent cleans up), or pass --force"])
    policy = policy_for_zone(desired, zone, force=True)
    snapshot = provider.read(zone.domain)
    plan = make_plan(Intent(owner, (), None), snapshot, policy)
    plan = replace(plan, changes=(*plan.changes, *heartbeat_removal(snapshot, owner, zone.domain, "prune-owner")))
    shown = f"{acting}\n" + planfmt.to_text([plan])
    if not plan.changes:
        return Result(EXIT_OK, [shown, _nothing_to_prune(snapshot, owner, zone.domain)])
    result = Result()
    if ask is None:
        result.out.append(shown)
    elif not ask(shown, f"remove {len(plan.changes)} change(s) of owner {owner} from {zone.domain}? [yes/no] "):
        result.line("nothing changed")
        return result
    applied = provider.apply(zone.domain, plan.changes, plan.guards)
    result.line(f"applied {len(applied.applied)} change(s); {len(applied.refused)} refused as stale (run again)")
    result.code = EXIT_OK if applied.ok else EXIT_ERROR
    return result


def _nothing_to_prune(snapshot: ZoneSnapshot, owner: str, domain: str) -> str:
    """Why prune-owner changes nothing: the owner holds nothing, or only through joint legacy
    TXT records (``a&&b``), which gitdns never rewrites nor deletes (nor does dns-operator)."""
    from gitdns.core.owner.zone import owners
    from gitdns.core.registry import decode_entries

    rows = owners(snapshot, ())
    row = next((r for r in rows if r.owner == owner), None)
    joint = sorted({rec.name for rec in snapshot.records if rec.type == "TXT"
                    for e in decode_entries(rec) if owner in e.joint})
    if row is None:
        known = ", ".join(r.owner for r in rows) or "none"
        return f"owner {owner} owns nothing in {domain} (its owners: {known}; `gitdns owners {domain}`)\n"
    if not joint:
        return f"owner {owner} owns nothing in {domain}\n"
    return (f"owner {owner} holds {row.records} record(s) in {domain} only through joint legacy ownership TXT "
            f"shared with {', '.join(row.shared_with) or 'other owners'} ({', '.join(joint)}): gitdns never rewrites "
            "or deletes a joint TXT (dns-operator neither), so nothing was changed; once every owner it lists is "
            "gone, delete those TXT records and the records they claim with the provider's own tools\n")


def _nothing_to_adopt(snapshot: ZoneSnapshot, names: Sequence[str], rtype: str | None, domain: str) -> list[str]:
    """Why adopt found no foreign record: per name, no such record, or whose it is."""
    from gitdns.core.owner.zone import owners

    owned: dict[RecordKey, list[str]] = {}
    for row in owners(snapshot, ()):
        for key in row.keys:
            owned.setdefault(key, []).append(row.owner)
    out: list[str] = []
    for name in names:
        keys = [k for k in owned if k.name == name and (rtype is None or k.type == rtype)]
        if keys:
            out += [f"{key} in {domain} is not foreign: owner(s) {', '.join(sorted(owned[key]))} claim it "
                    "(`gitdns owners` lists them; `gitdns prune-owner` removes a departed owner's)" for key in keys]
        else:
            kind = f" {rtype}" if rtype else ""
            out.append(f"no{kind} record at {name} in {domain}: nothing to adopt")
    return out


def adopt(repo: Path, names: Sequence[str] | None, zone_ident: str, cluster: str, *, rtype: str | None = None,
          force: bool = False, fences: Fences = STRICT, from_worktree: bool = False) -> Result:
    """Take over foreign records (without an ownership TXT) as ``cluster``'s: those the
    cluster's committed, merged desired state holds (`gitdns.commands.committed`; the work tree
    as it is with ``from_worktree``).  ``names`` None: every foreign record that desired state
    holds (`gitdns adopt --all`, after `gitdns import`)."""
    from gitdns.commands.committed import acting_on
    from gitdns.core.owner.zone import adopt_changes, foreign_records
    from gitdns.core.plan import fmt as planfmt
    from gitdns.reconcile.engine import find_cluster, intent_for, load

    acting = acting_on(repo, from_worktree=from_worktree)
    desired = load(repo)
    zone, provider = zone_and_provider(desired, zone_ident, repo, fences)
    who = find_cluster(desired, cluster)
    wanted = {r.key for r in intent_for(desired, who, zone).records}
    bare = sorted({k.name for k in wanted}) if names is None else [n.lower().rstrip(".") for n in names]
    snapshot = provider.read(zone.domain)
    found = foreign_records(snapshot, bare, rtype)
    if names is None:
        found = [rec for rec in found if rec.key in wanted]
        if not found:
            return Result(EXIT_ERROR, err=[f"no foreign record in {zone.domain} that {who.name}'s desired state "
                                           f"holds ({acting}): nothing to adopt"])
    if not found:
        return Result(EXIT_ERROR, err=_nothing_to_adopt(snapshot, bare, rtype, zone.domain))
    outside = [r for r in found if r.key not in wanted]
    if outside and not force:  # judged by the committed state: the refusal names the commit
        return Result(EXIT_ERROR, err=[f"{rec.key}: not in {who.name}'s desired state ({acting}); its next apply "
                                       "would delete it (add it to git first, or pass --force)" for rec in outside])
    rev = desired.state.revision.label if desired.state.revision else None
    changes = adopt_changes(found, who.id, zone.domain, rev=rev, group=who.group)
    applied = provider.apply(zone.domain, changes)
    result = Result(EXIT_OK if applied.ok else EXIT_ERROR)
    result.line(acting)
    result.lines([f"adopted {change.group} ({planfmt.change_line(change)})" for change in applied.applied])
    return result
