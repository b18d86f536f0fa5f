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
from gitdns.core.render import make_environment, render_dnsrecords

log = logging.getLogger(__name__)


def render_cluster(desired: Desired, cluster: Cluster, out: Path, *, namespace: str = "default",
                   templates: Path | None = None, all_zones: bool = False) -> list[Path]:
    """Render one DNSRecord per listener host; returns the files written (sorted)."""
    env = make_environment(load_template_sources(templates))
    target = out / cluster.name
    written: list[Path] = []
    for zone in desired.state.zones:
        if zone.name in desired.blocked:
            log.warning("render skipped: zone=%s reason=held", zone.domain)
            continue
        if not all_zones and zone.publisher is not Publisher.KUADRANT:
            continue
        for host in builder.build_hosts(desired.state, cluster, zone):
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
    return sorted(written)


def render(repo: Path, cluster: str, out: Path, *, namespace: str = "default", templates: Path | None = None,
           all_zones: bool = False) -> Result:
    """``gitdns render``: the files written on stdout, one a line."""
    from gitdns.reconcile.engine import find_cluster, load

    desired = load(repo)
    result = Result(err=problem_lines(desired))
    written = render_cluster(desired, find_cluster(desired, cluster), out, namespace=namespace,
                             templates=templates, all_zones=all_zones)
    result.lines([str(path) for path in written])
    result.err.append(f"rendered {len(written)} DNSRecord manifest(s) into {out}")
    result.code = EXIT_ERROR if desired.problems else EXIT_OK
    return result
