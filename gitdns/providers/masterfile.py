"""An RFC 1035 master file read as a zone snapshot: the source `gitdns import --from FILE` reads.

The file is parsed by dnspython's zone-file reader (``$ORIGIN``, ``$TTL``, ``$GENERATE``,
relative names, multi-line records) and turned into a `ZoneSnapshot` by the same conversion an
AXFR of an rfc2136 server gets (`gitdns.providers.rfc2136_native.snapshot`), so a zone imported
from its file and one imported from its server read alike.  ``$INCLUDE`` is refused: a file
handed to import names nothing else to open.  Record types gitdns does not manage land in the
snapshot's ``skipped``; the SOA gives its version.

dnspython is imported inside `read_master_file`, never when this module is imported.
"""

from __future__ import annotations

from gitdns.core.records import ZoneSnapshot, normalize_name
from gitdns.errors import ConfigError
from gitdns.providers.rfc2136_native import absolute, snapshot

MAX_BYTES = 256 * 1024 * 1024  # a master file larger than this is refused before it is parsed


def read_master_file(text: str, domain: str, source: str) -> ZoneSnapshot:
    """The records of the master file ``text`` (named ``source`` in errors) for zone ``domain``.
    Raises `ConfigError` naming ``source`` and the line for a file that does not parse."""
    import dns.exception
    import dns.rrset
    import dns.zone

    domain = normalize_name(domain)
    if len(text) > MAX_BYTES:
        raise ConfigError(f"{source}: {len(text)} characters, more than the {MAX_BYTES} a master file may have")
    try:
        zone = dns.zone.from_text(text, origin=absolute(domain), relativize=False, check_origin=False,
                                  filename=source, allow_include=False)
    except dns.exception.SyntaxError as exc:
        # dnspython says "<source>:<line>: <what>"
        message = str(exc)
        raise ConfigError(message if message.startswith(source) else f"{source}: {message}",
                          reason="InvalidMasterFile") from None
    except dns.exception.DNSException as exc:
        raise ConfigError(f"{source}: not a master file of zone {domain}: {exc}", reason="InvalidMasterFile") from None
    rrsets = [dns.rrset.from_rdata_list(name, rds.ttl, list(rds)) for name, rds in zone.iterate_rdatasets()]
    return snapshot(domain, rrsets, None)
