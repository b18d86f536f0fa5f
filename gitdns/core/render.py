"""Render Kuadrant dns-operator DNSRecord manifests through Jinja (pure).

Zones whose ``publisher`` is ``kuadrant`` are published by Kuadrant's dns-operator, not by
gitdns: gitdns renders one ``kuadrant.io/v1alpha1`` DNSRecord per listener host and leaves
applying it to Argo CD / Flux.  This module only turns values into text; reading the
template files is `gitdns.adapters.templates`, writing the output is the caller's job.

The manifest follows the dns-operator CRD: ``spec.rootHost``, ``spec.providerRef.name``,
``spec.endpoints[]`` in external-dns ``Endpoint`` shape (``dnsName``, ``recordType``,
``recordTTL``, ``setIdentifier``, ``targets``, ``providerSpecific[{name, value}]`` with the
names ``weight`` and ``geo-code``) and ``spec.healthCheck`` (``path``, ``port``, ``protocol``,
``failureThreshold``, ``interval``, ``additionalHeadersRef.name``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import jinja2

from gitdns.core.model import Cluster, HealthCheck
from gitdns.core.names import lb_host, short_hash
from gitdns.core.records import RecordSet
from gitdns.core.status.doc import quoted_scalar
from gitdns.errors import UnsupportedError

DNSRECORD_TEMPLATE = "kuadrant/dnsrecord.yaml.j2"
WEIGHT = "weight"
GEO_CODE = "geo-code"
MAX_NAME = 63  # a DNS-1123 label: safe for every Kubernetes object name
KUADRANT_HEALTH_PROTOCOLS = frozenset({"HTTP", "HTTPS"})

_PLAIN = re.compile(r"[A-Za-z0-9/][A-Za-z0-9._/-]*")
# Scalars a YAML 1.1 or 1.2 reader (ruamel, PyYAML, go-yaml) would not read as a string.
_NUMBER = re.compile(
    r"[-+]?(?:\.[0-9_]+|[0-9][0-9_]*(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?0[xXoObB][0-9a-fA-F_]+|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"
)
_KEYWORDS = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null", "none", "nan", "inf"})


def yaml_scalar(value: object) -> str:
    """A YAML scalar for ``value`` that every reader takes as the same string.

    Plain when unambiguous (host names, IPv4 addresses, simple paths); otherwise a
    double-quoted scalar with JSON-compatible escapes (valid YAML).  ``int`` stays a number.
    """
    if isinstance(value, bool):
        raise TypeError("yaml_scalar: booleans are not rendered through this filter")
    if isinstance(value, int):
        return str(value)
    text = str(value)
    if _PLAIN.fullmatch(text) and not _NUMBER.fullmatch(text) and text.lower() not in _KEYWORDS:
        return text
    return quoted_scalar(text)


def make_environment(sources: Mapping[str, str]) -> jinja2.Environment:
    """A Jinja environment over in-memory template sources (name -> text).

    StrictUndefined (a missing variable is an error, never an empty string), no HTML
    autoescaping, trailing newline kept, block tags trimmed.  Adds the ``yaml`` filter.
    """
    env = jinja2.Environment(
        loader=jinja2.DictLoader(dict(sources)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["yaml"] = yaml_scalar
    return env


def dnsrecord_name(host: str) -> str:
    """The DNSRecord ``metadata.name`` for a listener host (a DNS-1123 label).

    ``api.example.com`` -> ``api-example-com``; ``*.example.com`` -> ``wildcard-example-com``.
    Names past 63 characters are cut and end in a hash of the full host, so two long hosts
    sharing a prefix still get different names.
    """
    host = host.strip().lower().rstrip(".")
    labels = ["wildcard" if label == "*" else label for label in host.split(".")]
    name = re.sub(r"[^a-z0-9-]+", "-", "-".join(labels))
    name = re.sub(r"-{2,}", "-", name).strip("-") or "host"
    if len(name) > MAX_NAME:
        suffix = short_hash(host, 8)
        name = f"{name[: MAX_NAME - len(suffix) - 1].rstrip('-')}-{suffix}"
    return name


def render_dnsrecords(
    env: jinja2.Environment,
    *,
    cluster: Cluster,
    root_host: str,
    zone_domain: str,
    namespace: str,
    records: Sequence[RecordSet],
    health: HealthCheck | None,
    provider_ref: str | None,
) -> tuple[str, str]:
    """Render the DNSRecord for one listener host: ``(file name, YAML text)``.

    ``records`` are the record sets this cluster publishes for ``root_host`` (names
    absolute, no trailing dot).  Raises ValueError for a record outside the host or zone,
    and UnsupportedError for a health check Kuadrant cannot express.
    """
    _check_names(root_host, zone_domain, records)
    name = dnsrecord_name(root_host)
    text = env.get_template(DNSRECORD_TEMPLATE).render(
        name=name,
        namespace=namespace,
        cluster=cluster,
        root_host=root_host,
        zone_domain=zone_domain,
        provider_ref=provider_ref or None,
        endpoints=[_endpoint(r) for r in sorted(records, key=_endpoint_order)],
        health=_health(health) if health is not None else None,
    )
    return f"{name}.yaml", text


def _check_names(root_host: str, zone_domain: str, records: Sequence[RecordSet]) -> None:
    base = lb_host(root_host)
    if not (base == zone_domain or base.endswith("." + zone_domain)):
        raise ValueError(f"render: host {root_host} is not in zone {zone_domain}")
    for rec in records:
        if not (rec.name in (root_host, base) or rec.name.endswith("." + base)):
            raise ValueError(f"render: record {rec.key} is not under host {root_host}")


def _endpoint_order(rec: RecordSet) -> tuple[str, str, str]:
    return (rec.name, rec.type, rec.set_id)


def _endpoint(rec: RecordSet) -> dict[str, Any]:
    specific: list[dict[str, str]] = []
    if rec.geo is not None:
        specific.append({"name": GEO_CODE, "value": rec.geo})
    if rec.weight is not None:
        specific.append({"name": WEIGHT, "value": str(rec.weight)})
    return {
        "dns_name": rec.name,
        "record_type": rec.type,
        "ttl": rec.ttl,
        "set_identifier": rec.set_id,
        "targets": list(rec.values),
        "provider_specific": specific,
    }


def _health(check: HealthCheck) -> dict[str, Any]:
    protocol = check.protocol.upper()
    if protocol not in KUADRANT_HEALTH_PROTOCOLS:
        raise UnsupportedError(
            f"render: Kuadrant DNSRecord health checks support HTTP or HTTPS, not {check.protocol}"
        )
    if not (check.port in (80, 443) or 1024 <= check.port <= 49151):
        raise UnsupportedError(
            f"render: Kuadrant DNSRecord health checks allow ports 80, 443 and 1024-49151, not {check.port}"
        )
    return {
        "path": check.path,
        "port": check.port,
        "protocol": protocol,
        "failure_threshold": check.failure_threshold,
        "interval": go_duration(check.interval),
        "headers_secret": check.headers_secret,
    }


def go_duration(seconds: float) -> str:
    """Seconds as a Kubernetes ``metav1.Duration`` string: ``5`` -> ``5s``, ``0.5`` -> ``500ms``."""
    if seconds < 0:
        raise ValueError(f"render: negative interval {seconds}")
    if float(seconds).is_integer():
        return f"{int(seconds)}s"
    return f"{round(seconds * 1000)}ms"
