"""The Corefile snippet that serves a zone's rendered geo views with CoreDNS (pure).

A zone served from the `local` record store has one RFC 1035 master file per geo view
(`gitdns.core.views`, written by `gitdns.adapters.zonefile.write_views`).  CoreDNS picks the
view by the client's address with the ``view`` plugin: one server block per view, each with
``view NAME { expr incidr(client_ip(), 'CIDR') || ... }``, a ``file`` plugin reading that
view's master file and, when the view has weights, ``loadbalance weighted`` reading its
weight file; the default view comes last in a block without ``view`` (CoreDNS tries view
blocks in order and answers everyone else from it).  No ``forward``: these blocks answer the
zone and nothing else.  The snippet is ``<zone>.server`` next to the view files; the main
Corefile pulls it in with ``import``.

Which clients get which view is the Zone's local provider setting ``viewClients``::

    viewClients: "GEO-EU=10.1.0.0/16,192.0.2.0/24;US=198.51.100.0/24"

``;`` separates views (tried in this order), ``=`` names the view (a geo code used on the
zone's geo rows), ``,`` separates its CIDRs.  A view named there that the store has no geo
rows for answers like the default view (its file is still written, so the snippet never
points at a missing file).  ``corednsDir`` is the directory where CoreDNS sees the view files
(the agent's state volume mounted into CoreDNS); default: where the agent writes them.

Values in, text out; a bad setting is a `ValueError` naming the field, and so is a rendered
snippet that fails the parse rules CoreDNS applies (`gitdns.core.corefile.check`).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gitdns.core.corefile.check import shown, snippet_problems
from gitdns.core.model import Zone
from gitdns.core.providertypes import COREDNS_DIR as COREDNS_DIR
from gitdns.core.providertypes import VIEW_CLIENTS as VIEW_CLIENTS

if TYPE_CHECKING:  # a type only: jinja2 (~7 MiB) is imported by whoever renders
    import jinja2

SERVER_TEMPLATE = "coredns/zone.server.j2"
DEFAULT_VIEW = "default"
RELOAD = "30s"  # how often CoreDNS re-reads a view's master and weight files
_VIEW_RE = re.compile(r"^[A-Za-z0-9][-A-Za-z0-9]*$")
_DIRECTORY_RE = re.compile(r"/[-A-Za-z0-9._/+@=,~]*")


@dataclass(frozen=True, slots=True)
class ViewClients:
    """One view and the client networks that get it."""

    view: str
    cidrs: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ServedView:
    """A rendered view as the snippet needs it: its name, file stem, and whether it has weights."""

    name: str
    stem: str
    weights: bool = False


@dataclass(frozen=True, slots=True)
class ServerBlock:
    view: str
    label: str  # the view plugin's NAME
    stem: str
    expr: str
    weights: bool


def parse_view_clients(text: str) -> tuple[ViewClients, ...]:
    """``"GEO-EU=10.1.0.0/16,192.0.2.0/24;US=198.51.100.0/24"`` to views in order.  Raises
    ValueError saying what is wrong with which entry."""
    out: list[ViewClients] = []
    seen: set[str] = set()
    for raw in text.split(";"):
        entry = raw.strip()
        if not entry:
            continue
        view, eq, nets = (part.strip() for part in entry.partition("="))
        if not eq or not view:
            raise ValueError(f"{entry!r} is not VIEW=CIDR[,CIDR...]")
        if not _VIEW_RE.fullmatch(view) or view == DEFAULT_VIEW:
            raise ValueError(f"view {view!r} is not a geo code (letters, digits, '-'; not 'default', which "
                             "is the view for every other client)")
        if view in seen:
            raise ValueError(f"view {view!r} is listed twice")
        seen.add(view)
        cidrs = [c.strip() for c in nets.split(",") if c.strip()]
        if not cidrs:
            raise ValueError(f"view {view!r} has no CIDR")
        out.append(ViewClients(view, tuple(_network(view, c) for c in cidrs)))
    return tuple(out)


def _network(view: str, cidr: str) -> str:
    try:
        return str(ipaddress.ip_network(cidr, strict=True))
    except ValueError as exc:
        raise ValueError(f"view {view!r}: {cidr!r} is not a network in CIDR form ({exc})") from None


def view_clients(zone: Zone) -> tuple[ViewClients, ...]:
    """The zone's ``viewClients`` setting parsed; ValueError naming the setting and zone."""
    try:
        return parse_view_clients(zone.provider.setting(VIEW_CLIENTS) or "")
    except ValueError as exc:
        raise ValueError(f"spec.provider.settings.{VIEW_CLIENTS} of Zone {zone.name}: {exc}") from None


def _label(zone: str, view: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "-", f"{zone}-{view}").lower()


def blocks(zone: str, views: Sequence[ServedView], clients: Sequence[ViewClients]
           ) -> tuple[tuple[ServerBlock, ...], ServerBlock, tuple[str, ...]]:
    """The view blocks (clients' order), the default block, and views nobody is routed to."""
    by_name = {v.name: v for v in views}
    default = by_name.get(DEFAULT_VIEW, ServedView(DEFAULT_VIEW, DEFAULT_VIEW))
    out: list[ServerBlock] = []
    for entry in clients:
        view = by_name.get(entry.view, ServedView(entry.view, default.stem, default.weights))
        expr = " || ".join(f"incidr(client_ip(), '{cidr}')" for cidr in entry.cidrs)
        out.append(ServerBlock(entry.view, _label(zone, entry.view), view.stem, expr, view.weights))
    routed = {c.view for c in clients} | {DEFAULT_VIEW}
    unrouted = tuple(sorted(v.name for v in views if v.name not in routed))
    last = ServerBlock(DEFAULT_VIEW, _label(zone, DEFAULT_VIEW), default.stem, "", default.weights)
    return tuple(out), last, unrouted


def server_file(zone: str) -> str:
    return f"{zone}.server"


def directory_error(directory: str) -> str | None:
    """What keeps ``directory`` from being written unquoted into a Corefile (an absolute path
    of letters, digits and ``-._/+@=,~``), or None."""
    if _DIRECTORY_RE.fullmatch(directory):
        return None
    return (f"{shown(directory)} is not an absolute path of letters, digits and '-._/+@=,~' (CoreDNS would "
            "split it, or read a comment or a directive in it)")


def block_tokens(zone: str, port: int, directory: str, reload: str, block: ServerBlock) -> list[str]:
    """The tokens CoreDNS must read for one server block of zone.server.j2."""
    tokens = [f"{zone}:{port}", "{"]
    if block.expr:
        tokens += ["view", block.label, "{", "expr", *block.expr.split(" "), "}"]
    tokens += ["file", f"{directory}/{block.stem}.zone", "{", "reload", reload, "}"]
    if block.weights:
        tokens += ["loadbalance", "weighted", f"{directory}/{block.stem}.weights", "{", "reload", reload, "}"]
    return [*tokens, "errors", "}"]


def render_zone_server(env: jinja2.Environment, zone: str, directory: str, views: Sequence[ServedView],
                       clients: Sequence[ViewClients], *, port: int = 53, reload: str = RELOAD) -> str:
    """The Corefile snippet for ``zone`` whose view files CoreDNS finds in ``directory``.
    The text is checked with CoreDNS's parse rules (`gitdns.core.corefile.check`) before it is
    returned: a ValueError naming the zone says what is wrong, and nothing is to be written."""
    wrong = directory_error(directory)
    if wrong is not None:
        raise ValueError(f"zone {shown(zone)}: the CoreDNS snippet's directory ({COREDNS_DIR}): {wrong}")
    view_blocks, default, unrouted = blocks(zone, views, clients)
    directory = directory.rstrip("/") or "/"
    text = env.get_template(SERVER_TEMPLATE).render(
        zone=zone, port=port, directory=directory, reload=reload,
        blocks=list(view_blocks), default=default, unrouted=list(unrouted),
    )
    expected = [block_tokens(zone, port, directory, reload, b) for b in (*view_blocks, default)]
    problems = snippet_problems(text, expected, port)
    if problems:
        raise ValueError(f"zone {shown(zone)}: the rendered CoreDNS snippet {shown(server_file(zone))} fails "
                         f"CoreDNS's parse rules, not written: {'; '.join(problems[:3])}")
    return text
