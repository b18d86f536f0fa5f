"""An RFC 1035 master file read as a zone snapshot: the source `gitdns import --from FILE` reads.

The file is parsed by dnspython's zone-file reader (``$ORIGIN``, ``$TTL``, ``$GENERATE``,
relative names, multi-line records) and turned into a `ZoneSnapshot` by the same conversion an
AXFR of an rfc2136 server gets (`gitdns.providers.rfc2136.native.snapshot`), so a zone imported
from its file and one imported from its server read alike.  ``$INCLUDE`` is refused: a file
handed to import names nothing else to open.  Record types gitdns does not manage land in the
snapshot's ``skipped``; the SOA gives its version.

dnspython is imported inside `read_master_file`, never when this module is imported.
"""

from __future__ import annotations

from gitdns.core.records import ZoneSnapshot, normalize_name
from gitdns.errors import ConfigError
from gitdns.providers.rfc2136.native import absolute, snapshot

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
        raise ConfigError(_located(str(exc), text, domain, source), reason="InvalidMasterFile") from None
    except dns.exception.DNSException as exc:
        raise ConfigError(f"{source}: not a master file of zone {domain}: {exc}", reason="InvalidMasterFile") from None
    rrsets = [dns.rrset.from_rdata_list(name, rds.ttl, list(rds)) for name, rds in zone.iterate_rdatasets()]
    return snapshot(domain, rrsets, None)


def _parses(text: str, domain: str) -> bool:
    import dns.exception
    import dns.zone

    try:
        dns.zone.from_text(text, origin=absolute(domain), relativize=False, check_origin=False, allow_include=False)
    except dns.exception.DNSException:
        return False
    return True


def _located(message: str, text: str, domain: str, source: str) -> str:
    """dnspython's "<source>:<line>: <what>", its line made the record's: a record that ends
    badly is found once its line break is read, and reported on the line after it."""
    prefix = f"{source}:"
    head, _, what = message[len(prefix):].partition(": ") if message.startswith(prefix) else ("", "", message)
    if not head.isdigit():
        return f"{source}: {message}"
    line = int(head)
    lines = text.split("\n")
    if line >= 2 and not _parses("\n".join(lines[:line - 1]) + "\n", domain):
        line -= 1
    return f"{source}:{line}: {what}"
