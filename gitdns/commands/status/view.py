"""`gitdns status`: every cluster's status branch, aggregated (docs/agent.md).

    aggregate(trees, cluster=None) -> dict    per cluster and per DNSPolicy; JSON-ready
    cluster_names(trees) -> {id: name}        each status branch's cluster, as its summary names it
    to_json(agg) -> str                       json.dumps(sort_keys=True)
    to_text(agg) -> str                       compact tables

Input: the tips `gitdns.adapters.status.branch.read_all` returns ({cluster id: StatusTree}).
Each tree holds ``summary.yaml`` (cluster, clusterId, mode, group, desiredRevision,
appliedRevision, attemptedRevision, ready, conditions[{type, status, reason, message}],
policies{name: {ready, hosts, message}}, heartbeat) and ``zones/<zone>.yaml`` (zone,
provider, held, problems, owned[record dicts], conflicts, lastChangeIds).

A DNSPolicy is Ready once every cluster that has hosts for it says it is ready (as Kuadrant's
DNSPolicy RFC has it); otherwise the clusters that do not are listed as lagging.  A policy no
cluster publishes hosts for is not Ready.  A cluster whose status cannot be read counts as not ready.
A zone whose document says ``held: true`` stays at its last good revision (the revision does
not validate for it): the cluster has not applied the revision there, whatever its summary's
appliedRevision says.  A selection (``cluster``) of retired clusters only is not a failure.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from gitdns.core.status.doc import StatusDocError, StatusTree, load
from gitdns.core.text import inline
from gitdns.core.text import lines as text_lines

SUMMARY = "summary.yaml"
ZONES = "zones/"
UNPUBLISHED = "its agent has not published a status yet"  # a Cluster in git with no status branch
# Conditions that are bad when True (Flux's abnormal-true polarity); all others are bad unless True.
ABNORMAL_TRUE = frozenset(
    {"Stalled", "Reconciling", "Degraded", "UnresolvedConflictDiscovered", "GroupsDivergedFromGit"}
)


def aggregate(trees: Mapping[str, StatusTree], cluster: str | None = None,
              known: Collection[str] | None = None) -> dict[str, Any]:
    """The fleet's status; ``cluster`` (an id or a name) keeps one cluster.  ``known`` (every
    Cluster id and name in the desired head; None when unknown): a status branch whose cluster
    git no longer names is ``retired`` — left out of readiness, the counts and the policies."""
    clusters = {cid: _cluster(cid, tree) for cid, tree in sorted(trees.items())}
    for cid, c in clusters.items():
        c["retired"] = known is not None and cid not in known and c["cluster"] not in known
    if cluster is not None:
        clusters = {cid: c for cid, c in clusters.items() if cluster in (cid, c["cluster"])}
    active = {cid: c for cid, c in clusters.items() if not c["retired"]}
    for c in clusters.values():
        if c["retired"]:
            c.pop("_policies")
            c.pop("_delegation")
    policies = _policies(active)
    _carried_by(active)
    # nothing active: not ready, unless one cluster was asked for and it is retired (not a failure)
    something = bool(active) or (cluster is not None and bool(clusters))
    return {
        "clusters": clusters,
        "policies": policies,
        "ready": something and all(c["ready"] for c in active.values())
        and all(p["ready"] for p in policies.values()),
        "counts": {
            "clusters": len(active),
            "clustersReady": sum(1 for c in active.values() if c["ready"]),
            "policies": len(policies),
            "policiesReady": sum(1 for p in policies.values() if p["ready"]),
            # only when the desired head was read: without it, nothing can be said retired
            **({"clustersRetired": len(clusters) - len(active)} if known is not None else {}),
        },
    }


def _cluster(cid: str, tree: StatusTree) -> dict[str, Any]:
    errors: list[str] = []
    summary = _doc(tree, SUMMARY, errors)
    if SUMMARY not in tree.files:
        errors.append(f"{SUMMARY}: missing")
    conditions = [c for c in _list(summary.get("conditions")) if isinstance(c, Mapping)]
    applied, desired = summary.get("appliedRevision"), summary.get("desiredRevision")
    zones = {}
    delegation: dict[str, dict[str, str]] = {}  # remote id -> zone -> state (a primary's merge)
    for path in sorted(p for p in tree.files if p.startswith(ZONES) and p.endswith(".yaml")):
        doc = _doc(tree, path, errors)
        name = str(doc.get("zone") or path[len(ZONES):-len(".yaml")])
        zones[name] = {
            "provider": doc.get("provider"),
            "held": doc.get("held") is True,
            "problems": [str(p) for p in _list(doc.get("problems"))],
            "error": str(doc.get("error") or ""),
            "appliedRevision": str(doc["appliedRevision"]) if doc.get("appliedRevision") else None,
            "owned": len(_list(doc.get("owned"))),
            "conflicts": len(_list(doc.get("conflicts"))),
        }
        merged = doc.get("delegation")
        for remote, verdict in (merged.items() if isinstance(merged, Mapping) else ()):
            state = verdict.get("state") if isinstance(verdict, Mapping) else None
            delegation.setdefault(str(remote), {})[name] = str(state or "unknown")
    ready = summary.get("ready") is True and not errors
    return {
        "cluster": str(summary.get("cluster") or cid),
        "clusterId": cid,
        "mode": summary.get("mode"),
        "group": summary.get("group"),
        "ready": ready,
        "desiredRevision": desired,
        "appliedRevision": applied,
        "attemptedRevision": summary.get("attemptedRevision"),
        "upToDate": bool(desired) and applied == desired,
        "notOk": [_condition(c) for c in conditions if not _ok(c)],
        "zones": zones,
        "heldZones": sorted(z for z, v in zones.items() if v["held"]),
        "heartbeat": summary.get("heartbeat"),
        "commit": tree.sha,
        "committed": tree.time,
        "errors": errors,
        "_policies": _cluster_policies(summary.get("policies")),
        "_delegation": delegation,
    }


def cluster_names(trees: Mapping[str, StatusTree]) -> dict[str, str]:
    """{cluster id: the name its summary gives (else the id)}."""
    names = {}
    for cid, tree in sorted(trees.items()):
        summary = _doc(tree, SUMMARY, [])
        names[cid] = str(summary.get("cluster") or cid)
    return names


CARRYING = ("merged", "partial", "stale-kept")


def _carried_by(clusters: dict[str, dict[str, Any]]) -> None:
    """Delegation: for every remote, the primaries publishing its records (and those that do not,
    with why), from the primaries' ``delegation`` maps."""
    seen: dict[str, dict[str, dict[str, str]]] = {}
    for cid, c in clusters.items():
        for remote, zones in c.pop("_delegation").items():
            seen.setdefault(remote, {})[cid] = zones
    for cid, c in clusters.items():
        if c.get("mode") != "remote" and cid not in seen:
            continue
        by = seen.get(cid, {})
        c["carriedBy"] = sorted(p for p, zones in by.items() if any(s in CARRYING for s in zones.values()))
        c["notCarriedBy"] = {p: sorted(set(zones.values())) for p, zones in sorted(by.items())
                             if not any(s in CARRYING for s in zones.values())}


def _doc(tree: StatusTree, path: str, errors: list[str]) -> dict[str, Any]:
    text = tree.files.get(path)
    if text is None:
        return {}
    try:
        return load(text)
    except StatusDocError as exc:
        errors.append(f"{path}: {exc}")
        return {}


def _list(value: object) -> list[Any]:
    return list(value) if isinstance(value, list) else []


def _ok(condition: Mapping[str, Any]) -> bool:
    status = str(condition.get("status", ""))
    if str(condition.get("type", "")) in ABNORMAL_TRUE:
        return status != "True"
    return status == "True"


def _condition(c: Mapping[str, Any]) -> dict[str, str]:
    return {k: str(c.get(k) or "") for k in ("type", "status", "reason", "message")}


def _cluster_policies(value: object) -> dict[str, dict[str, Any]]:
    if not isinstance(value, Mapping):
        return {}
    out: dict[str, dict[str, Any]] = {}
    for name, entry in value.items():
        entry = entry if isinstance(entry, Mapping) else {}
        out[str(name)] = {"ready": entry.get("ready") is True,
                          "hosts": sorted(str(h) for h in _list(entry.get("hosts"))),
                          "message": str(entry.get("message") or "")}
    return out


def _policies(clusters: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for cid, c in clusters.items():
        for name, entry in c.pop("_policies").items():
            p = seen.setdefault(name, {"clusters": [], "lagging": [], "hosts": set(), "messages": {}})
            if not entry["hosts"]:
                continue  # this cluster publishes nothing for the policy
            p["clusters"].append(cid)
            p["hosts"].update(entry["hosts"])
            if not entry["ready"] or c["errors"]:
                p["lagging"].append(cid)
                if entry["message"]:
                    p["messages"][cid] = entry["message"]
    return {
        name: {"ready": bool(p["clusters"]) and not p["lagging"], "clusters": p["clusters"],
               "lagging": p["lagging"], "hosts": sorted(p["hosts"]), "messages": p["messages"]}
        for name, p in sorted(seen.items())
    }


def to_json(agg: Mapping[str, Any]) -> str:
    return json.dumps(agg, indent=2, sort_keys=True) + "\n"


def to_text(agg: Mapping[str, Any]) -> str:
    """Tables: clusters (ready, applied revision and when, lag — with how many zones are held —,
    what is not OK), the held zones (their last good revision and why: the zone document's
    first problem, else its error), policies, delegation, retired clusters and last errors."""
    rows = [("CLUSTER", "ID", "READY", "APPLIED", "APPLIED AT", "LAG", "ZONES", "NOT OK")]
    for cid, c in agg["clusters"].items():
        applied = _short(c["appliedRevision"])
        if not c["upToDate"] and applied != "-":
            applied += "*"
        bad = [f"{x['type']}={x['status']}({x['reason']})" if x["reason"] else f"{x['type']}={x['status']}"
               for x in c["notOk"]]
        bad += [f"held:{z}" for z in c["heldZones"]] + c["errors"]
        ready = "Retired" if c.get("retired") else _yes(c["ready"])
        behind = lag_cell(c.get("lag"))
        if c["heldZones"] and not c.get("retired") and behind != "-":
            behind += f" ({len(c['heldZones'])} zone{'s' if len(c['heldZones']) != 1 else ''} held)"
        rows.append((c["cluster"], cid[:13], ready, applied, c.get("appliedAt") or "-", behind,
                     str(len(c["zones"])), "; ".join(bad) or "-"))
    for waiting in agg.get("unpublished", ()):
        rows.append((waiting["cluster"], (waiting["id"] or "-")[:13], "NoStatus", "-", "-", "-", "-",
                     f"no status branch: {UNPUBLISHED}"))
    lines = table(rows)
    holding = [(c["cluster"], zone, c["zones"][zone]) for c in agg["clusters"].values() if not c.get("retired")
               for zone in c["heldZones"]]
    if holding:  # the revision does not validate for the zone: its last good one stays
        hrow = [("HELD", "ZONE", "LAST GOOD", "WHY")]
        hrow += [(name, zone, _short(label_sha(z.get("appliedRevision"))) if z.get("appliedRevision") else "unknown",
                  held_reason(z)) for name, zone, z in holding]
        lines += ["", *table(hrow)]
    if agg["policies"]:
        prow = [("POLICY", "READY", "CLUSTERS", "LAGGING")]
        names = {cid: c["cluster"] for cid, c in agg["clusters"].items()}
        names |= {w["id"] or w["cluster"]: w["cluster"] for w in agg.get("unpublished", ())}
        for name, p in agg["policies"].items():
            lag = [f"{names.get(cid, cid)}" + (f" ({p['messages'][cid]})" if cid in p["messages"] else "")
                   for cid in p["lagging"]]
            prow.append((name, _yes(p["ready"]), str(len(p["clusters"])), ", ".join(lag) or "-"))
        lines += ["", *table(prow)]
    remotes = {cid: c for cid, c in agg["clusters"].items() if "carriedBy" in c}
    if remotes:
        names = {cid: c["cluster"] for cid, c in agg["clusters"].items()}
        drow = [("REMOTE", "CARRIED BY", "NOT CARRIED BY")]
        for c in remotes.values():
            carried = ", ".join(names.get(p, p) for p in c["carriedBy"]) or "-"
            missing = ", ".join(f"{names.get(p, p)} ({'/'.join(s)})" for p, s in c["notCarriedBy"].items())
            drow.append((c["cluster"], carried, missing or "-"))
        lines += ["", *table(drow)]
    retired = {cid: c for cid, c in agg["clusters"].items() if c.get("retired")}
    if retired:
        rrow = [("RETIRED", "ID", "REMOVED FROM GIT", "RECORDS REMOVED", "LAST STATUS")]
        for cid, c in retired.items():
            gone = c.get("removedFromGit") or {}
            removed = f"{gone['at']} ({gone['revision'][:7]})" if gone else "not found in history"
            records = c.get("recordsRemoved") or {}
            done = (f"{records['at']} (applied {_short(records['appliedRevision'])})" if records
                    else "not by its agent: gitdns prune-owner " + cid)
            rrow.append((c["cluster"], cid[:13], removed, done, c.get("committedAt") or "-"))
        lines += ["", *table(rrow)]
    errors = [(c["cluster"], c["lastError"]) for c in agg["clusters"].values() if c.get("lastError")]
    if errors:
        erow = [("LAST ERROR", "AT", "NOW", "REASON: MESSAGE")]
        erow += [(name, e["at"], "yes" if e["current"] else "no", f"{e['reason']}: {e['message']}".strip(": "))
                 for name, e in errors]
        lines += ["", *table(erow)]
    counts = agg["counts"]
    lines += ["", f"{counts['clustersReady']}/{counts['clusters']} clusters ready, "
                  f"{counts['policiesReady']}/{counts['policies']} policies ready"
                  + (f", {counts['clustersRetired']} retired" if counts.get("clustersRetired") else "")
                  + (f", {counts['clustersUnpublished']} without a status yet" if counts.get("clustersUnpublished")
                     else "")
                  + ("" if agg["ready"] else " — NOT READY")]
    return text_lines(lines)


def held_reason(zone: Mapping[str, Any]) -> str:
    """Why a zone is held, from its status document: its first problem (and how many more), else its error."""
    problems = [str(p) for p in zone.get("problems") or []]
    if problems:
        return problems[0] + (f" (+{len(problems) - 1} more)" if len(problems) > 1 else "")
    return str(zone.get("error") or "") or "held"


def label_sha(label: object) -> str:
    """The sha of a ``<time>.<sha7>`` revision label (a zone's appliedRevision), or the text as it is."""
    text = str(label or "")
    return text.rsplit(".", 1)[1] if "." in text else text


def lag_cell(lag: Mapping[str, Any] | None) -> str:
    """``2 commits, 3h05m`` (behind the head since its oldest unapplied commit), ``0``, or ``-``."""
    if not lag:
        return "-"
    if not lag["commits"]:
        return "0"
    return f"{lag['commits']} commit{'s' if lag['commits'] != 1 else ''}, {duration(lag['seconds'])}"


def duration(seconds: int) -> str:
    seconds = max(0, int(seconds))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s"


def _short(rev: object) -> str:
    if not rev:
        return "-"
    text = str(rev)
    return text[:7] if len(text) >= 40 else text


def _yes(flag: bool) -> str:
    return "Ready" if flag else "NotReady"


def table(rows: Sequence[tuple[str, ...]]) -> list[str]:
    """Columns two spaces apart, each as wide as its widest cell (the last one unpadded); every
    cell through the text gate (a status branch is written by whoever can push to it)."""
    rows = [tuple(inline(str(cell)) for cell in row) for row in rows]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join([*(cell.ljust(w) for cell, w in zip(r[:-1], widths, strict=True)), r[-1]]).rstrip()
            for r in rows]
