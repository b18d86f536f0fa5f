"""What the pipeline's steps share: loading a desired state, the plan policy of a zone,
reading and planning, applying with re-plans on stale writes, verifying, rendering views.

These are helpers, not steps: the steps (`gitdns.reconcile.steps`) call them, and the
pipeline (`gitdns.reconcile.pipeline`) runs the steps.  Nothing here prints.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from gitdns.adapters.git.rev import head_info, parent_files
from gitdns.adapters.repo import load_repo, load_schemas
from gitdns.core import builder
from gitdns.core.blobcache import ValidationCache
from gitdns.core.desired import Desired, HeadInfo
from gitdns.core.limits import DEFAULT_LIMITS, ReadLimits
from gitdns.core.loader import LoadResult, ParseMemo
from gitdns.core.loader import load as load_files
from gitdns.core.model import Cluster, DesiredState, Publisher, Zone
from gitdns.core.plan.planner import plan as make_plan
from gitdns.core.plan.values import Intent, Plan, PlanMode, PlanPolicy
from gitdns.core.reach import Network
from gitdns.core.records import RecordKey, ZoneSnapshot
from gitdns.core.registry import parse_txt_name
from gitdns.core.review import reviewed_zones
from gitdns.errors import ConfigError
from gitdns.providers.base import ApplyResult, Provider
from gitdns.providers.fences import STRICT, Fences
from gitdns.providers.registry import make_provider
from gitdns.reconcile.zonepass import REAL_TIME, Pacing, ZoneOutcome

log = logging.getLogger(__name__)

ProviderFactory = Callable[[Zone], Provider]
# Stale-write retries: exponential backoff with full jitter (10 ms doubling, capped at 2 s per
# wait) within a time budget, so many writers contending for one record set spread out
# instead of retrying in lock step and giving up together.
STALE_RETRY_BUDGET = 30.0
STALE_BACKOFF_BASE = 0.01
STALE_BACKOFF_CAP = 2.0


def from_files(root: Path | str, files: Mapping[str, str], head: HeadInfo | None,
               previous: Callable[[], DesiredState | None] | None = None,
               memo: ParseMemo | ValidationCache | None = None) -> Desired:
    """A Desired from files held in memory (the agent reads them from a git commit); ``memo``
    keeps parsed files across calls (`gitdns.core.loader.ParseMemo`), or everything each file
    made and the checks' results (`gitdns.core.blobcache.ValidationCache`, the agent's)."""
    from gitdns.adapters.repo import check_files as check

    result = check(files, load_schemas(), memo)
    state = replace(result.state, revision=head.revision if head else None)
    return Desired(str(root), state, tuple(result.problems), head, previous, result.rejected)


def load(root: Path, limits: ReadLimits = DEFAULT_LIMITS, probe_ranges: Sequence[Network] = ()) -> Desired:
    """A Desired from the checkout at ``root``, its files read within ``limits`` (the
    operator's caps; `gitdns.core.limits`), probes allowed to reach ``probe_ranges``."""
    result: LoadResult = load_repo(root, limits, probe_ranges)
    head = head_info(root)
    state = replace(result.state, revision=head.revision if head else None)
    return Desired(str(root), state, tuple(result.problems), head, rejected=result.rejected)


def default_factory(base_dir: Path, *, namespace: str | None = None, fences: Fences = STRICT) -> ProviderFactory:
    """One provider per zone, made once.  ``base_dir`` holds every `local` store (the agent's
    state directory, the repository for the one-shot verbs); ``fences`` are the operator's
    allow-lists of endpoints, rfc2136 servers and credential sources (default: none).  A zone
    naming something they do not allow raises a `ConfigError` naming the Zone's file, the field
    and the setting (only that zone is held; nothing is sent).  A zone without
    ``spec.provider`` gets the provider of the default provider secret in ``namespace``
    (default: the agent's own), or a stand-in whose calls raise why there is none, so only
    that zone is held."""
    cache: dict[str, Provider] = {}

    def factory(zone: Zone) -> Provider:
        if zone.name not in cache:
            try:
                cache[zone.name] = make_provider(zone.domain, zone.provider, base_dir, namespace=namespace,
                                                 fences=fences)
            except ConfigError as exc:
                origin = zone.origin
                where = f"{origin.file}:{origin.line}" if origin.line else origin.file
                raise ConfigError(f"{where}: {exc}" if where else str(exc), reason=exc.reason) from None
        return cache[zone.name]

    return factory


def find_cluster(desired: Desired, ident: str) -> Cluster:
    cluster = desired.state.cluster(ident)
    if cluster is None:
        known = ", ".join(sorted(c.name for c in desired.state.clusters)) or "none"
        raise ConfigError(f"--cluster {ident}: no Cluster in {desired.root} has this id or name "
                          f"(known: {known})")
    return cluster


def previous_state(desired: Desired) -> DesiredState | None:
    """The desired state of HEAD's parent commit, for the reviewed-removal exemption."""
    files = parent_files(Path(desired.root))
    if files is None:
        return None
    return load_files(files, load_schemas()).state


def policy_for_zone(desired: Desired, zone: Zone, *, force: bool = False,
                    mode: PlanMode = PlanMode.SYNC, reviewed: bool = False) -> PlanPolicy:
    head = desired.head
    sha = head.revision.sha if head else ""
    ack = zone.safety.acknowledge
    acknowledged = bool(ack and sha and sha.startswith(ack)) or bool(
        head and head.allows_mass_change(zone.domain))
    return PlanPolicy(
        zone=zone.domain,
        known_owners=tuple(c.id for c in desired.state.clusters),
        registry=zone.registry == "txt",
        max_change_fraction=zone.safety.max_change_fraction,
        min_managed=zone.safety.min_managed,
        acknowledged=acknowledged,
        force=force,
        mode=mode,
        reviewed=reviewed,
    )


def intent_for(desired: Desired, cluster: Cluster, zone: Zone) -> Intent:
    records = builder.desired_for_zone(desired.state, cluster, zone)
    return Intent(cluster.id, records, desired.state.revision, cluster.group)


def skip_reason(desired: Desired, zone: Zone) -> str:
    if zone.name in desired.blocked:
        return "held: the zone's desired state does not validate; the last published state stays"
    if zone.publisher is Publisher.KUADRANT:
        return "publisher is kuadrant: DNSRecords are rendered (gitdns render), not published"
    return ""


def plan_zone(desired: Desired, cluster: Cluster, zone: Zone, provider: Provider,
              *, force: bool = False, mode: PlanMode = PlanMode.SYNC,
              intent: Intent | None = None,
              names: Collection[str] | None = None, reviewed: bool = False) -> tuple[Plan, ZoneSnapshot]:
    """Read (the whole zone, or only ``names``) and plan; a stalled plan is re-judged when
    git reviewed the removal (the previous revision is loaded only then), or when the caller
    says the removal was judged elsewhere (``reviewed``: a primary's remotes withdrew it)."""
    snapshot = provider.read(zone.domain, names) if names is not None else provider.read(zone.domain)
    intent = intent if intent is not None else intent_for(desired, cluster, zone)
    plan = make_plan(intent, snapshot, policy_for_zone(desired, zone, force=force, mode=mode))
    if plan.stalled and (reviewed or _reviewed(desired, zone)):
        plan = make_plan(intent, snapshot, policy_for_zone(desired, zone, force=force, mode=mode,
                                                           reviewed=True))
    return plan, snapshot


def _reviewed(desired: Desired, zone: Zone) -> bool:
    old = desired.previous() if desired.previous is not None else previous_state(desired)
    return old is not None and zone.name in reviewed_zones(old, desired.state)


def apply_with_retries(desired: Desired, cluster: Cluster, zone: Zone, provider: Provider,
                        outcome: ZoneOutcome, force: bool, mode: PlanMode,
                        budget: float = STALE_RETRY_BUDGET, intent: Intent | None = None,
                        names: Collection[str] | None = None, reviewed: bool = False,
                        pacing: Pacing = REAL_TIME) -> None:
    """Apply; a change group refused as stale is re-read and re-planned at once, again and
    again with full-jitter backoff, until it lands or the time budget runs out (``pacing``:
    the clock and pauses that budget is counted in).  A group the
    provider failed (not stale: content it will not take) is one error and is not sent again
    in this pass, whatever re-plans follow; the next pass tries it again."""
    plan = outcome.plan
    assert plan is not None
    deadline = pacing.clock() + budget
    attempt = 0
    while not plan.stalled and plan.changes:
        failed = outcome.failed_groups
        changes = [c for c in plan.applicable if c.group not in failed]
        if not changes:
            return
        result: ApplyResult = provider.apply(zone.domain, changes, [g for g in plan.guards if g.group not in failed])
        outcome.applied += len(result.applied)
        for group, why in result.failed:  # once each, across re-plans; named once (providers may name it)
            outcome.fail(group, why, changes)
        if not result.refused:
            return
        attempt += 1
        outcome.refused_retries += 1
        log.info("stale write refused: zone=%s groups=%d attempt=%d", zone.domain, len(result.refused), attempt)
        wait = pacing.uniform(0, min(STALE_BACKOFF_CAP, STALE_BACKOFF_BASE * 2 ** min(attempt, 16)))
        if pacing.clock() + wait > deadline:
            outcome.stale_out = True
            outcome.errors.append(f"stale writes still refused after {attempt} re-plans in {budget:g}s; "
                                  "the validation loop retries")
            return
        pacing.sleep(wait)
        again = refused_names([g for g, _ in result.refused], names)
        deadline += ready_to_write(provider, zone.domain, again)  # the budget's wait is not the retries'
        plan, _ = plan_zone(desired, cluster, zone, provider, force=force, mode=mode, intent=intent, names=again,
                            reviewed=reviewed)
        outcome.plan = plan


def ready_to_write(provider: Provider, zone: str, names: Collection[str] | None) -> float:
    """Before a read whose plan is meant to be written: where an agent's request budget pays for
    the provider's calls, wait until it holds that read's requests and a write's, so the write
    follows its read at once (`gitdns.agent.budget.BudgetedProvider.ready_to_write`); the seconds
    waited.  Without a budget (the CLI) the read goes at once."""
    ready = getattr(provider, "ready_to_write", None)
    waited = ready(zone, names) if callable(ready) else 0.0
    return float(waited) if isinstance(waited, int | float) else 0.0


def refused_names(groups: Collection[RecordKey], names: Collection[str] | None) -> frozenset[str] | None:
    """What a re-plan after a stale refusal reads: where the pass read by name, the refused
    groups' names and the ownership TXT names it read for them (the other groups landed; at a
    thousand clusters re-reading every name cost an hour of the agent's share); else the
    whole zone (None)."""
    if names is None:
        return None
    wanted = {g.name for g in groups}
    out = set(wanted)
    for name in names:
        parsed = parse_txt_name(name)
        if name in wanted or (parsed is not None and parsed[2] in wanted):
            out.add(name)
    return frozenset(out)


def verify(desired: Desired, cluster: Cluster, zone: Zone, provider: Provider, force: bool,
           mode: PlanMode, intent: Intent | None = None, names: Collection[str] | None = None,
           reviewed: bool = False, failed: Collection[RecordKey] = ()) -> int:
    """Re-read and re-plan: the number of changes still wanted (0 when our records are all
    there).  Conflicts are not counted: they were left alone on purpose; nor are the groups
    of ``failed``: the provider refused them, and their error says so already."""
    plan, _ = plan_zone(desired, cluster, zone, provider, force=force, mode=mode, intent=intent, names=names,
                        reviewed=reviewed)
    if plan.stalled:
        return 0
    return sum(1 for c in plan.changes if c.group not in failed)


def render_views(provider: Provider, zone: Zone, state: DesiredState | None = None) -> dict[str, str]:
    """RFC 1035 master files per geo view, for stores that serve through them (`local`), and
    the CoreDNS snippet ``<zone>.server`` serving them (the zone's ``viewClients`` and
    ``corednsDir`` settings).  A zone served by primaries (``state`` says so) is rendered the
    same on every primary: no ownership registry in the views, SOA serial from the content."""
    views_dir = getattr(provider, "views_dir", None)
    if not callable(views_dir):
        return {}
    from gitdns.adapters.zonefile import Serving, write_views
    from gitdns.core.delegation import is_served
    from gitdns.core.zonecorefile import COREDNS_DIR, view_clients

    try:
        clients = view_clients(zone)
    except ValueError as exc:
        raise ConfigError(f"{exc} ({zone.origin.file or 'the Zone document'})") from None
    served = state is not None and is_served(state, zone)
    serving = Serving(clients=clients, snippet=True, coredns_dir=zone.provider.setting(COREDNS_DIR) or "",
                      registry=not served, content_serial=served)
    changed: set[str] = set()
    texts = write_views(views_dir(zone.domain), zone.domain, provider.read, serving=serving, changed=changed)
    reload = getattr(provider, "reload_views", None)
    if changed and callable(reload):  # the server serving them loads them again (the operator's --local-reload)
        reload(zone.domain, changed)
    return texts


def reload_notes(provider: Provider, zone: Zone) -> list[str]:
    """What telling the server to reload the zone's views did since the last call (`local`
    with the operator's ``--local-reload``; `gitdns.adapters.serverreload`); [] otherwise."""
    take = getattr(provider, "take_reload_notes", None)
    if not callable(take):
        return []
    found = take(zone.domain)
    return [str(note) for note in found] if isinstance(found, list) else []


def needs_verify(outcome: ZoneOutcome, always: bool = False) -> bool:
    """A clean apply (every group landed under compare-and-swap on the first try) leaves the
    records as written: re-reading would only cost calls.  Verify when something was refused
    or failed, or when asked (one-shot runs have no validation loop after them) — but not
    after the stale-write retries ran out of time: verifying would re-read and re-plan what
    just took too long (at a thousand clusters each read is 250 s of the agent's share), and the
    validation loop retries it once the share affords it."""
    if always:
        return True
    return not outcome.stale_out and (outcome.refused_retries > 0 or bool(outcome.errors))
