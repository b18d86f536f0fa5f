"""The ActiveGroups file a ``groups`` change edits: created with a header when the
zone has none, else edited in place (ruamel round trip: comments, order and quoting kept)."""

from __future__ import annotations

import io
import itertools
import re
from collections.abc import MutableMapping, Sequence
from typing import Any

from gitdns.commands.groups.check import GroupsRefused
from gitdns.core.desired import Desired
from gitdns.core.model import Zone
from gitdns.core.problems import Problem, blocked_zones

GROUPS_DIR = "groups"


def new_file_text(zone: Zone, target: Sequence[str], serial: int) -> str:
    listed = ", ".join(target)
    return (
        f"# Active failover groups of zone {zone.domain} (docs/failover.md).\n"
        "# Only clusters in these groups (and ungrouped clusters) publish; an empty list: every group.\n"
        "# Change through `gitdns groups add|remove|set` and a pull request; bump spec.serial on every change.\n"
        "# yaml-language-server: $schema=../schemas/activegroups.schema.json\n"
        "apiVersion: gitdns.io/v1alpha1\n"
        "kind: ActiveGroups\n"
        "metadata:\n"
        f"  name: {zone.name}-groups\n"
        "spec:\n"
        f"  zone: {zone.name}\n"
        f"  serial: {serial}\n"
        f"  groups: [{listed}]\n"
    )


def _yaml(text: str) -> Any:
    from ruamel.yaml import YAML

    yaml = YAML()  # round trip
    yaml.preserve_quotes = True
    yaml.width = 4096
    offset = _dash_offset(text)
    if offset:
        yaml.indent(mapping=2, sequence=offset + 2, offset=offset)
    yaml.explicit_start = bool(re.match(r"(?:\s*#[^\n]*\n)*\s*---", text))
    return yaml


def _dash_offset(text: str) -> int:
    """How far block-sequence dashes are indented under their key (0 or 2, usually)."""
    lines = text.splitlines()
    for prev, line in itertools.pairwise(lines):
        key = re.match(r"( *)[^\s#-][^:#]*:\s*(#.*)?$", prev)
        dash = re.match(r"( *)- ", line)
        if key and dash:
            return max(0, len(dash.group(1)) - len(key.group(1)))
    return 0


def edit_text(text: str, index: int, target: Sequence[str], serial: int) -> str:
    """The ActiveGroups document ``index`` of ``text`` with ``spec.groups`` = ``target`` and
    ``spec.serial`` = ``serial``; everything else (comments, order, quoting) kept."""
    from ruamel.yaml.comments import CommentedSeq

    yaml = _yaml(text)
    docs = list(yaml.load_all(text))
    if index >= len(docs) or not isinstance(docs[index], MutableMapping):
        raise GroupsRefused(f"document {index} of the ActiveGroups file is not a mapping")
    doc = docs[index]
    spec = doc.get("spec")
    if not isinstance(spec, MutableMapping):
        raise GroupsRefused("the ActiveGroups document has no spec mapping")
    spec["serial"] = serial
    seq = spec.get("groups")
    if isinstance(seq, list):
        keep = [g for g in seq if g in target]
        for i in reversed(range(len(seq))):
            if seq[i] not in target:
                del seq[i]
        for name in target:
            if name not in keep:
                seq.append(name)
    else:
        seq = CommentedSeq(list(target))
        seq.fa.set_flow_style()
        spec["groups"] = seq
    out = io.StringIO()
    if len(docs) == 1:
        yaml.dump(docs[0], out)
    else:
        yaml.dump_all(docs, out)
    return out.getvalue()


def new_problems(old: Desired, new: Desired, zone: Zone) -> list[Problem]:
    """Problems the edit introduces, and any problem that holds the zone."""
    before = {p.format() for p in old.problems}
    held = zone.name in blocked_zones(new.problems, [z.name for z in new.state.zones])
    return [p for p in new.problems
            if p.format() not in before or (held and zone.name in blocked_zones([p], [zone.name]))]
