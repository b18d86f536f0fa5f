"""CoreDNS files for the orchestrator's tenants (pure): hosts files, the Corefile snippet, a lint.

One orchestrator serves one node pool.  Its tenants are grouped by DNS zone; each zone gets
ONE CoreDNS server block with ONE ``hosts`` plugin that reads that zone's hosts file::

    tenant-a.io:53 {
        hosts /etc/coredns/custom/tenant-a.hosts { ttl 30; reload 2s; no_reverse }
        errors
        cache 30
        prometheus :9153
    }

The blocks go into one snippet, ``gitdns-<pool>.server``, which the stock CoreDNS Corefile
imports (``import /etc/coredns/custom/*.server``, as k3s ships it).  No ``forward``, no
``kubernetes``, no ``fallthrough``: a tenant block answers its own zone and nothing else, so
the tenant servers are never an open recursive resolver (the Corefile of the OpenOva "DNS
Failover Service" specification put two ``hosts`` blocks into the ``.:53`` block, which CoreDNS
refuses, and forwarded everything).

Rules (docs/health.md):

* the zone of a tenant is ``spec.zone``; without it, the longest common suffix of its domains
  (for one domain, the domain itself), which must have at least two labels;
* tenants of one pool sharing a zone share one block whose hosts file is the merge (the union
  of their domains on every line); its file is ``<zone>.hosts``, a single tenant's is
  ``<tenant>.hosts``;
* a zone claimed by tenants of two node pools would need two server blocks for one
  ``zone:53``; the pool whose name sorts first keeps it, the other skips those tenants;
* a domain outside its tenant's zone can never be asked of that block: it is left out and
  reported;
* tenants refused by `gitdns.core.checks.tenants` (``layout``'s ``refused``) are left out and
  claim no zone.

`check_server` and `check_hosts` read what was rendered back with CoreDNS's parse rules
(`gitdns.core.corefile.check`) and say how it differs from what was meant.

Nothing here touches disk or clock: values in, text out (`render_*`), and problems as data.

The package's other module: `check` — Rendered CoreDNS files checked with the parse rules
CoreDNS applies, before they are delivered (pure).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gitdns.core.corefile.check import (
    character_problems,
    dns_name_error,
    file_name_error,
    hosts_problems,
    hosts_rows_match,
    snippet_problems,
)
from gitdns.core.model import DesiredState, Tenant

if TYPE_CHECKING:  # a type only: jinja2 (~7 MiB) is imported by whoever renders
    import jinja2

HOSTS_TEMPLATE = "coredns/tenant.hosts.j2"
SERVER_TEMPLATE = "coredns/tenant.server.j2"
CUSTOM_DIR = "/etc/coredns/custom"
ROOT_ZONES = frozenset({".", ".:53"})


@dataclass(frozen=True, slots=True)
class CorefileSettings:
    """What goes into every tenant server block."""

    custom_dir: str = CUSTOM_DIR  # where CoreDNS sees the files (the coredns-custom mount)
    port: int = 53
    ttl: int = 30  # hosts answers' TTL (the OpenOva spec's 30 s)
    reload: str = "2s"  # how often the hosts plugin re-reads its file
    cache: int = 30  # CoreDNS cache cap, seconds
    prometheus: str = ":9153"


@dataclass(frozen=True, slots=True)
class ZoneBlock:
    zone: str
    tenants: tuple[str, ...]  # sorted
    domains: tuple[str, ...]  # sorted union of the tenants' domains inside the zone
    hosts_file: str  # file name (no directory)


@dataclass(frozen=True, slots=True)
class Skipped:
    tenant: str
    reason: str
    code: str = ""  # the problem code `gitdns validate` reports it with (gitdns.core.checks.tenants.layout)


@dataclass(frozen=True, slots=True)
class Layout:
    """The pool's zone blocks, and what was left out and why (``refused``: tenants fenced off
    by `gitdns.core.checks.tenants`)."""

    pool: str
    blocks: tuple[ZoneBlock, ...]
    skipped: tuple[Skipped, ...] = ()
    refused: tuple[Skipped, ...] = ()

    @property
    def server_file(self) -> str:
        return server_file(self.pool)

    def block_of(self, tenant: str) -> ZoneBlock | None:
        return next((b for b in self.blocks if tenant in b.tenants), None)


def server_file(pool: str) -> str:
    return f"gitdns-{pool}.server"


def _inside(name: str, zone: str) -> bool:
    return name == zone or name.endswith("." + zone)


def inferred_zone(domains: Iterable[str]) -> str | None:
    """The longest common suffix (whole labels) of ``domains``; None when below two labels."""
    split = [d.lower().rstrip(".").removeprefix("*.").split(".") for d in domains]
    if not split:
        return None
    common: list[str] = []
    for labels in zip(*(list(reversed(s)) for s in split), strict=False):
        if any(label != labels[0] for label in labels):
            break
        common.append(labels[0])
    if len(common) < 2:
        return None
    return ".".join(reversed(common))


def tenant_zone(tenant: Tenant) -> str | None:
    return tenant.zone if tenant.zone else inferred_zone(tenant.domains)


def _zone_owners(state: DesiredState, refused: Mapping[str, str]) -> dict[str, str]:
    """zone -> the node pool that serves it (the first pool name among its tenants)."""
    owners: dict[str, str] = {}
    for tenant in state.tenants:
        if tenant.name in refused:
            continue
        zone = tenant_zone(tenant)
        if zone is not None and (zone not in owners or tenant.node_pool < owners[zone]):
            owners[zone] = tenant.node_pool
    return owners


def layout(state: DesiredState, pool: str, refused: Mapping[str, str] | None = None) -> Layout:
    """Group ``pool``'s tenants into zone blocks (see the module docstring for the rules);
    tenants named in ``refused`` (name -> why) are left out and claim no zone."""
    refused = refused or {}
    owners = _zone_owners(state, refused)
    members: dict[str, list[Tenant]] = {}
    domains: dict[str, set[str]] = {}
    skipped: list[Skipped] = []
    fenced: list[Skipped] = []
    for tenant in sorted(state.tenants, key=lambda t: t.name):
        if tenant.node_pool != pool:
            continue
        if tenant.name in refused:
            fenced.append(Skipped(tenant.name, refused[tenant.name]))
            continue
        zone = tenant_zone(tenant)
        if zone is None:
            skipped.append(Skipped(tenant.name, "its domains share no parent below a top-level domain; "
                                                "set spec.zone", "ReservedTenantZone"))
            continue
        if owners[zone] != pool:
            skipped.append(Skipped(tenant.name, f"zone {zone} is served by node pool {owners[zone]} "
                                                "(one CoreDNS server block per zone); move the tenant "
                                                "to that pool or give it its own zone", "TenantZoneServedElsewhere"))
            continue
        inside = {d for d in tenant.domains if _inside(d, zone)}
        for outside in sorted(set(tenant.domains) - inside):
            skipped.append(Skipped(tenant.name, f"domain {outside} is outside zone {zone}: left out",
                                   "TenantDomainOutsideZone"))
        if not inside:
            continue
        members.setdefault(zone, []).append(tenant)
        domains.setdefault(zone, set()).update(inside)
    blocks = []
    for zone in sorted(members):
        names = tuple(sorted(t.name for t in members[zone]))
        hosts = f"{names[0]}.hosts" if len(names) == 1 else f"{zone}.hosts"
        blocks.append(ZoneBlock(zone, names, tuple(sorted(domains[zone])), hosts))
    return Layout(pool, tuple(blocks), tuple(skipped), tuple(fenced))


def ip_order(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> int:
    """Where ``ip`` sorts in the hosts files, as one int: IPv4 before IPv6, then numerically."""
    return int(ip) if ip.version == 4 else (1 << 128) | int(ip)


def sort_ips(ips: Iterable[str]) -> list[str]:
    """IPv4 before IPv6, numerically (`ip_order`); duplicates dropped.  Raises ValueError for a non-IP."""
    parsed = {ipaddress.ip_address(ip) for ip in ips}
    return [str(ip) for ip in sorted(parsed, key=ip_order)]


def render_hosts(env: jinja2.Environment, pool: str, block: ZoneBlock, ips: Iterable[str], total: int) -> str:
    """A zone block's hosts file.  Never empty: an empty published set is the caller's bug
    (fail open keeps the last set; docs/health.md)."""
    ordered = sort_ips(ips)
    if not ordered:
        raise ValueError(f"render: refusing an empty hosts file for zone {block.zone} (node pool {pool})")
    return env.get_template(HOSTS_TEMPLATE).render(
        pool=pool, zone=block.zone, tenants=list(block.tenants), total=total, ips=ordered,
        domains=list(block.domains), names=" ".join(block.domains),
    )


def render_server(env: jinja2.Environment, plan: Layout, settings: CorefileSettings = CorefileSettings()) -> str:
    return env.get_template(SERVER_TEMPLATE).render(
        pool=plan.pool, custom_dir=settings.custom_dir.rstrip("/"), settings=settings, blocks=list(plan.blocks),
    )


def render_files(env: jinja2.Environment, plan: Layout, ips: Iterable[str], total: int,
                 settings: CorefileSettings = CorefileSettings()) -> dict[str, str]:
    """Every file the pool owns: ``{file name: text}`` (nothing when it has no tenants)."""
    if not plan.blocks:
        return {}
    published = sort_ips(ips)
    files = {b.hosts_file: render_hosts(env, plan.pool, b, published, total) for b in plan.blocks}
    files[plan.server_file] = render_server(env, plan, settings)
    return files


# --- what was rendered, checked before delivery (gitdns.core.corefile.check) ----------------


def server_block_tokens(block: ZoneBlock, settings: CorefileSettings = CorefileSettings()) -> list[str]:
    """The tokens CoreDNS must read for ``block``'s server block (tenant.server.j2)."""
    hosts = f"{settings.custom_dir.rstrip('/')}/{block.hosts_file}"
    return [f"{block.zone}:{settings.port}", "{",
            "hosts", hosts, "{", "ttl", str(settings.ttl), "reload", settings.reload, "no_reverse", "}",
            "errors", "cache", str(settings.cache), "prometheus", settings.prometheus, "}"]


def check_server(text: str, blocks: Sequence[ZoneBlock], settings: CorefileSettings = CorefileSettings()) -> list[str]:
    """Problems of a rendered snippet that should serve exactly ``blocks``; empty when fine."""
    names = [wrong for b in blocks if (wrong := file_name_error(b.hosts_file, ".hosts")) is not None]
    expected = [server_block_tokens(b, settings) for b in blocks]
    return names + snippet_problems(text, expected, settings.port)


def check_hosts(text: str, block: ZoneBlock, ips: Iterable[str], *, ordered: bool = False) -> list[str]:
    """Problems of a rendered hosts file that should give ``block``'s domains ``ips``.
    ``ordered``: ``ips`` are already as `sort_ips` gives them (canonical, sorted, no
    duplicates; the publisher's `compute` makes them so once per set of nodes), and are not
    parsed again (10,000 addresses: ~40 ms)."""
    names = [wrong for d in block.domains if (wrong := dns_name_error(d, wildcard=True)) is not None]
    rows = ips if ordered else sort_ips(ips)
    if not names and isinstance(rows, Sequence) and hosts_rows_match(text, rows, " ".join(block.domains)):
        return character_problems(text)  # the rows as rendered: told without splitting 10,000 lines
    return names[:1] + hosts_problems(text, ((ip, *block.domains) for ip in rows))


# --- lint: the checks CoreDNS (which the tests do not run) and our own rules would make -------

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}]|[^\s{}"]+')


@dataclass(frozen=True, slots=True)
class _Block:
    keys: tuple[str, ...]
    line: int
    directives: tuple[tuple[str, int], ...]  # top-level directive names in the block, with lines


def _tokens(text: str) -> list[tuple[str, int, bool]]:
    """(token, line, first on its line) for every token, comments removed."""
    out: list[tuple[str, int, bool]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _strip_comment(raw)
        first = True
        for match in _TOKEN.finditer(line):
            out.append((match.group(0), number, first))
            first = False
    return out


def _strip_comment(line: str) -> str:
    quoted = False
    for i, char in enumerate(line):
        if char == '"' and (i == 0 or line[i - 1] != "\\"):
            quoted = not quoted
        elif char == "#" and not quoted:
            return line[:i]
    return line


def parse_blocks(text: str) -> tuple[list[_Block], list[str]]:
    """Server blocks of a Corefile (snippets and top-level imports skipped) and syntax problems."""
    blocks: list[_Block] = []
    problems: list[str] = []
    tokens = _tokens(text)
    i = 0
    while i < len(tokens):
        if tokens[i][0] == "import":  # a top-level import: the rest of its line
            line = tokens[i][1]
            while i < len(tokens) and tokens[i][1] == line:
                i += 1
            continue
        keys: list[str] = []
        line = tokens[i][1]
        while i < len(tokens) and tokens[i][0] not in "{}":
            keys.append(tokens[i][0])
            i += 1
        if i >= len(tokens):
            problems.append(f"line {line}: {' '.join(keys)!r} is not followed by a block")
            break
        if tokens[i][0] == "}":
            problems.append(f"line {tokens[i][1]}: unbalanced '}}'")
            i += 1
            continue
        i, directives, closed = _block_body(tokens, i + 1)
        if not closed:
            problems.append(f"line {line}: block {' '.join(keys)!r} is never closed")
        if not keys:
            problems.append(f"line {line}: a block without a server address")
        elif not (keys[0].startswith("(") and keys[0].endswith(")")):  # a snippet is no server
            blocks.append(_Block(tuple(keys), line, tuple(directives)))
    return blocks, problems


def _block_body(tokens: list[tuple[str, int, bool]], i: int) -> tuple[int, list[tuple[str, int]], bool]:
    depth = 1
    directives: list[tuple[str, int]] = []
    while i < len(tokens):
        token, line, first = tokens[i]
        if token == "{":
            depth += 1
        elif token == "}":
            depth -= 1
            if depth == 0:
                return i + 1, directives, True
        elif depth == 1 and first:
            directives.append((token, line))
        i += 1
    return i, directives, False


def _address(key: str) -> tuple[str, str]:
    """(zone, port) of a server key such as ``dns://example.org:1053`` or ``.``."""
    key = key.split("://", 1)[-1]
    zone, _, port = key.rpartition(":") if ":" in key and not key.endswith("]") else (key, "", "")
    zone = zone or key
    return zone.lower().rstrip(".") + "." if zone != "." else ".", port or "53"


def lint(corefile_text: str) -> list[str]:
    """Problems CoreDNS would refuse, or that let a tenant block answer more than its zone; empty
    when the text is fine.

    Every server block: ``errors`` present, at most one ``hosts`` (CoreDNS refuses a second
    one in a block), no address served twice.  Tenant blocks (every block not for the root
    zone ``.``): no ``forward`` (a tenant server must not recurse) and no ``kubernetes``.
    """
    blocks, problems = parse_blocks(corefile_text)
    seen: dict[tuple[str, str], int] = {}
    for block in blocks:
        where = f"line {block.line} ({' '.join(block.keys)})"
        names = [name for name, _ in block.directives]
        if "errors" not in names:
            problems.append(f"{where}: no 'errors' plugin: failures would go unlogged")
        if names.count("hosts") > 1:
            lines = ", ".join(str(n) for name, n in block.directives if name == "hosts")
            problems.append(f"{where}: {names.count('hosts')} 'hosts' plugins (lines {lines}); CoreDNS allows "
                            "one per server block: one block per zone, each with its own hosts file")
        tenant = not all(_address(k)[0] == "." for k in block.keys)
        for plugin in ("forward", "kubernetes"):
            if tenant and plugin in names:
                problems.append(f"{where}: '{plugin}' in a tenant block: tenant servers answer only their "
                                "own zones (no recursion for anyone)")
        for key in block.keys:
            address = _address(key)
            if address in seen:
                problems.append(f"{where}: {address[0]}:{address[1]} is already served by the block on "
                                f"line {seen[address]}")
            seen.setdefault(address, block.line)
    return problems


def lint_files(files: Mapping[str, str], main_corefile: str = "") -> list[str]:
    """Lint the ``*.server`` files of ``files`` and ``main_corefile`` as CoreDNS sees them
    after ``import``: each text on its own (problems prefixed with its name), then addresses
    served by blocks of two different texts."""
    texts = [("Corefile", main_corefile)] if main_corefile else []
    texts += sorted((n, t) for n, t in files.items() if n.endswith(".server"))
    out = [f"{name}: {p}" for name, text in texts for p in lint(text)]
    seen: dict[tuple[str, str], str] = {}
    for name, text in texts:
        mine: set[tuple[str, str]] = set()
        for block in parse_blocks(text)[0]:
            for key in block.keys:
                address = _address(key)
                if address in seen and address not in mine:
                    out.append(f"{name}: line {block.line}: {address[0]}:{address[1]} is already served "
                               f"in {seen[address]}")
                mine.add(address)
        for address in mine:
            seen.setdefault(address, name)
    return out
