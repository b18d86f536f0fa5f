"""Record values as a RecordSet writes them, per type: `value_error` says what is wrong with a
value, or returns None when it is what its type holds.

A value is checked here, before anything is written, in the form every provider takes it:
the zone-file and rfc2136 adapters hand it to dnspython's rdata parser, the cloud providers
send it as it is.  The accepted forms (tested against dnspython's parser):

- ``A`` / ``AAAA``: an IPv4 / IPv6 address (`gitdns.core.addresses`);
- ``CNAME`` / ``NS``: a host name, trailing dot optional (no wildcard);
- ``MX``: ``<preference 0..65535> <host>`` (``.``: the null MX of RFC 7505);
- ``SRV``: ``<priority> <weight> <port> <target>``, numbers 0..65535, target a host or ``.``;
- ``CAA``: ``<flags 0..255> <tag> <value>``, tag 1..15 letters or digits (RFC 8659), value a
  double-quoted string (``\\"``, ``\\\\`` and ``\\DDD`` escapes) or one bare word;
- ``TXT``: the text itself, one value per TXT record value, at most `MAX_TXT` characters, not
  starting with a quote (gitdns quotes TXT values itself; ``"text"`` would keep its quotes on
  some providers and lose them on others) nor with ``heritage=`` (that is what an ownership
  record says).

Every value is printable ASCII (space to ``~``): no newline, tab, NUL or other control
character (a zone file cannot hold them unescaped, and no two providers take them alike), and
no other character either (providers split a long TXT value into 255-octet strings, which
would cut a multi-byte character in two).  Fields are separated by spaces.
"""

from __future__ import annotations

import re

from gitdns.core.addresses import host_error, ip_error, shown

MAX_TXT = 4000  # characters of one TXT value (Route53's limit; the providers split it in 255-octet strings)
_NUMBER = re.compile(r"[0-9]{1,5}")
_CAA = re.compile(r"([0-9]{1,3}) +([A-Za-z0-9]{1,15}) +(.+)")
_QUOTED = re.compile(r'"(?:[^"\\]|\\[0-9]{3}|\\[^0-9])*"')
_BARE = re.compile(r'[^\s"();\\]+')
_ESCAPE = re.compile(r"\\([0-9]{3})")
_NOT_ASCII_PRINTABLE = re.compile(r"[^ -~]")
_IP_FAMILY = {"A": 4, "AAAA": 6}
_FIELDS = {"MX": ("preference", "exchange"), "SRV": ("priority", "weight", "port", "target")}
_MAX = {"preference": 65535, "priority": 65535, "weight": 65535, "port": 65535, "flags": 255}


def _unprintable(value: str) -> str | None:
    found = _NOT_ASCII_PRINTABLE.search(value)
    if found is None:
        return None
    at = found.start()
    what = "the control character" if not value[at].isprintable() else "the non-ASCII character"
    return f"{shown(value)} holds {what} {value[at]!r} at position {at}: record values are printable ASCII"


def _target(value: str, null_allowed: bool) -> str | None:
    if value == "." and null_allowed:
        return None
    if value.startswith("*"):
        return f"{shown(value)} is not a host name (a wildcard is no target)"
    return host_error(value)


def _number(field: str, text: str) -> str | None:
    if not _NUMBER.fullmatch(text) or int(text) > _MAX[field]:
        return f"the {field} {shown(text)} is not a number from 0 to {_MAX[field]}"
    return None


def _fields(rtype: str, value: str) -> str | None:
    names = _FIELDS[rtype]
    parts = [p for p in value.split(" ") if p]
    if len(parts) != len(names):
        form = " ".join(f"<{n}>" for n in names)
        return f"{shown(value)} has {len(parts)} fields; {rtype} takes {len(names)}: {form}"
    *numbers, target = parts
    for name, text in zip(names, numbers, strict=False):
        wrong = _number(name, text)
        if wrong is not None:
            return wrong
    wrong = _target(target, null_allowed=True)
    return None if wrong is None else f"the {names[-1]} {wrong}"


def _caa(value: str) -> str | None:
    match = _CAA.fullmatch(value)
    if match is None:
        return f"{shown(value)} is not <flags> <tag> <value> (tag: 1 to 15 letters or digits)"
    flags, _, text = match.groups()
    wrong = _number("flags", flags)
    if wrong is not None:
        return wrong
    if text.startswith('"'):
        if not _QUOTED.fullmatch(text) or any(int(d) > 255 for d in _ESCAPE.findall(text)):
            return f"the value {shown(text)} is not one double-quoted string (escape \" and \\ inside it)"
        return None
    if not _BARE.fullmatch(text):
        return f"the value {shown(text)} is neither one double-quoted string nor one word"
    return None


def _txt(value: str) -> str | None:
    if len(value) > MAX_TXT:
        return f"the text is {len(value)} characters long; a TXT value holds at most {MAX_TXT}"
    if value.startswith('"'):
        return f"{shown(value)} starts with a quote: write the text without quotes, gitdns quotes it"
    if value.startswith("heritage="):
        return f"{shown(value)} would read as an ownership record (it starts with 'heritage=')"
    return None


def value_error(rtype: str, value: str) -> str | None:
    """What keeps ``value`` from being a value of a record of type ``rtype``; None when it is
    one.  Types gitdns does not hold are not judged here (the schema names them)."""
    wrong = _unprintable(value)
    if wrong is not None:
        return wrong
    family = _IP_FAMILY.get(rtype)
    if family is not None:
        return ip_error(value, family)
    if rtype in ("CNAME", "NS"):
        return _target(value, null_allowed=False)
    if rtype in _FIELDS:
        return _fields(rtype, value)
    if rtype == "CAA":
        return _caa(value)
    if rtype == "TXT":
        return _txt(value)
    return None


HINTS = {
    "A": "an IPv4 address such as 192.0.2.10",
    "AAAA": "an IPv6 address such as 2001:db8::10",
    "CNAME": "a host name such as target.example.com.",
    "NS": "a host name such as ns1.example.net.",
    "MX": "<preference> <host>, e.g. '10 mail.example.com.'",
    "SRV": "<priority> <weight> <port> <target>, e.g. '10 5 5060 sip.example.com.'",
    "CAA": "<flags> <tag> \"<value>\", e.g. '0 issue \"letsencrypt.org\"'",
    "TXT": f"printable ASCII text without surrounding quotes, at most {MAX_TXT} characters, e.g. 'v=spf1 -all'",
}
