"""`gitdns render`: Kuadrant DNSRecord manifests for a cluster, written to a directory.

For zones whose publisher is `kuadrant`, Argo CD or Flux apply these manifests on the
cluster where Kuadrant's dns-operator runs; gitdns never publishes those hosts itself and
never commits rendered output.
"""

from __future__ import annotations

import logging
from pathlib import Path

from gitdns.adapters.templates import load_template_sources
from gitdns.commands import EXIT_ERROR, EXIT_OK, Result
from gitdns.commands.zones import problem_lines
from gitdns.core import builder
from gitdns.core.desired import Desired
from gitdns.core.model import Cluster, Publisher
from gitdns.core.render import dnsrecord_name, make_environment, render_dnsrecords

log = logging.getLogger(__name__)


def render_cluster(desired: Desired, cluster: Cluster, out: Path, *, namespace: str = "default",
                   templates: Path | None = None, all_zones: bool = False,
                   notes: list[str] | None = None) -> list[Path]:
    """Render one DNSRecord per listener host; returns the files written (sorted).  A host with
    nothing to publish (every address excluded) gets no DNSRecord, as Kuadrant creates none
    for a listener without endpoints; why goes to ``notes``."""
    env = make_environment(load_template_sources(templates))
    target = out / cluster.name
    written: list[Path] = []
    emptied: set[Path] = set()  # hosts that publish nothing now: an old manifest of theirs goes
    for zone in desired.state.zones:
        if zone.name in desired.blocked:
            log.warning("render skipped: zone=%s reason=held", zone.domain)
            continue
        if not all_zones and zone.publisher is not Publisher.KUADRANT:
            continue
        for host in builder.build_hosts(desired.state, cluster, zone):
            if not host.records:
                if notes is not None:
                    notes.extend(f"{n}: no DNSRecord rendered" for n in host.notes)
                emptied.add(target / f"{dnsrecord_name(host.host)}.yaml")
                continue
            name, text = render_dnsrecords(
                env, cluster=cluster, root_host=host.host, zone_domain=zone.domain,
                namespace=namespace, records=host.records, health=host.health,
                provider_ref=zone.provider.credentials.secret if zone.provider.credentials else None,
            )
            path = target / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if not path.exists() or path.read_text() != text:
                path.write_text(text)
            written.append(path)
    for stale in sorted(emptied - set(written)):
        if stale.is_file():
            stale.unlink()
            log.info("render: removed=%s reason=no endpoints", stale)
    return sorted(written)


def render(repo: Path, cluster: str, out: Path, *, namespace: str = "default", templates: Path | None = None,
           all_zones: bool = False) -> Result:
    """``gitdns render``: the files written on stdout, one a line."""
    from gitdns.reconcile.engine import find_cluster, load

    desired = load(repo)
    result = Result(err=problem_lines(desired))
    notes: list[str] = []
    written = render_cluster(desired, find_cluster(desired, cluster), out, namespace=namespace,
                             templates=templates, all_zones=all_zones, notes=notes)
    result.lines([str(path) for path in written])
    result.err.extend(f"note: {n}" for n in notes)
    result.err.append(f"rendered {len(written)} DNSRecord manifest(s) into {out}")
    result.code = EXIT_ERROR if desired.problems else EXIT_OK
    return result
