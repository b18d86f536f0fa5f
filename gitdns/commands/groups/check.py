"""Failover group names and sets: the checks and helpers every ``groups`` verb and
``failover simulate`` share."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gitdns.adapters.git.auth import GitAuth
from gitdns.core import groups
from gitdns.core.checks.groups import GROUP_FORBIDDEN, MAX_GROUP_NAME
from gitdns.core.model import Zone
from gitdns.errors import PermanentError
from gitdns.providers.base import Provider
from gitdns.providers.fences import STRICT, Fences

ACTIONS = ("get", "add", "remove", "set", "reconcile", "log")


class GroupsRefused(PermanentError):
    reason = "GroupsChangeRefused"


@dataclass(frozen=True, slots=True)
class Request:
    action: str  # one of ACTIONS
    zone: str  # a Zone's domain or metadata.name
    groups: tuple[str, ...] = ()
    repo: Path = Path(".")
    push: bool = False
    branch: str | None = None
    direct: bool = False
    force: bool = False
    message: str | None = None
    provider_type: str | None = None
    provider_settings: tuple[str, ...] = ()  # KEY=VALUE
    credentials_env: str | None = None
    credentials_file: str | None = None
    auth: GitAuth = field(default_factory=GitAuth)  # transport of the status reads and --push (commands/git/remote.py)
    fences: Fences = STRICT  # what the Zone may name (the operator's flags; gitdns/providers/fences.py)
    from_worktree: bool = False  # --direct: act on the work tree as it is (gitdns/commands/committed.py)
    format: str = "text"  # get: text or json (gitdns/commands/groups/view.py)


def show(items: Iterable[str]) -> str:
    """Group names for a message; an empty set means every group is active."""
    listed = sorted(items)
    return ", ".join(listed) if listed else "(all groups)"


def check_group_names(names: Sequence[str]) -> None:
    bad: list[str] = []
    for name in names:
        forbidden = sorted({ch for ch in name if ch in GROUP_FORBIDDEN})
        if not name or len(name) > MAX_GROUP_NAME or forbidden:
            bad.append(repr(name))
    if bad:
        raise GroupsRefused(f"invalid group name(s) {', '.join(bad)}: 1..{MAX_GROUP_NAME} characters, "
                            "none of ; & , space \" '")


def target_groups(action: str, base: Iterable[str], names: Sequence[str]) -> tuple[str, ...]:
    """The active groups after ``action`` (exact names; empty: every group active)."""
    have = set(base)
    if action == "add":
        have |= set(names)
    elif action == "remove":
        have -= set(names)
    elif action == "set":
        have = set(names)
    return tuple(sorted(have))


def read_groups(provider: Provider, zone: Zone) -> groups.ZoneGroups:
    """The zone's two active-group TXT records (a per-name read)."""
    names = [groups.kuadrant_name(zone.domain), groups.gitdns_name(zone.domain)]
    return groups.read_zone_groups(provider.read(zone.domain, names=names), zone.domain)
