"""A faster parse of ``ListResourceRecordSets`` pages (pure: bytes in, dicts out).

botocore parses every response by walking the service model shape by shape, about 25 µs per
rrset: a quarter of a CLI run's CPU for a 20,000-rrset zone.  `split_rows` parses the
``<ResourceRecordSets>`` element of a page with ElementTree directly into the dicts botocore
would build for it (the fields `route53_batch.from_native` and the provider read, with
botocore's types: ``TTL`` and ``Weight`` ints, ``EvaluateTargetHealth`` a bool; other
elements as text) and returns the body without it, for botocore to parse the rest (paging
markers, metadata) as usual.  Anything unexpected returns None and botocore parses the whole
page.  `install` hooks it into a client through botocore's ``before-parse`` event, whose
``customized_response_dict`` is merged into the parsed response.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

EVENT = "before-parse.route-53.ListResourceRecordSets"
_OPEN, _CLOSE, _EMPTY = b"<ResourceRecordSets>", b"</ResourceRecordSets>", b"<ResourceRecordSets/>"
_INTS = frozenset({"TTL", "Weight", "Bias"})
_LISTS = frozenset({"ResourceRecords"})
_STRUCTS = frozenset({"GeoLocation", "AliasTarget", "CidrRoutingConfig", "GeoProximityLocation", "Coordinates"})


def _local(tag: str) -> str:
    return tag if tag[0] != "{" else tag.rsplit("}", 1)[-1]


def _struct(elem: ET.Element) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for child in elem:
        name = _local(child.tag)
        if name in _LISTS:
            out[name] = [_struct(member) for member in child]
        elif name in _STRUCTS or len(child):
            out[name] = _struct(child)
        else:
            text = child.text or ""
            if name in _INTS:
                out[name] = int(text)
            elif name in ("EvaluateTargetHealth", "MultiValueAnswer"):
                out[name] = text == "true"
            else:
                out[name] = text
    return out


def split_rows(body: bytes) -> tuple[list[dict[str, Any]], bytes] | None:
    """(the page's rrsets as botocore's dicts, the body without them), or None when the
    page is not shaped as expected (botocore then parses all of it)."""
    start = body.find(_OPEN)
    if start < 0:
        return None
    end = body.find(_CLOSE, start)
    if end < 0 or body.find(_OPEN, start + 1) >= 0:
        return None
    end += len(_CLOSE)
    try:
        element = ET.fromstring(body[start:end])
        rows = [_struct(rrs) for rrs in element if _local(rrs.tag) == "ResourceRecordSet"]
    except (ET.ParseError, ValueError):
        return None
    return rows, body[:start] + _EMPTY + body[end:]


def before_parse(response_dict: dict[str, Any], customized_response_dict: dict[str, Any], **_: Any) -> None:
    """The ``before-parse`` handler: successful pages only; errors are left to botocore."""
    body = response_dict.get("body")
    if response_dict.get("status_code") != 200 or not isinstance(body, bytes):
        return
    split = split_rows(body)
    if split is None:
        return
    customized_response_dict["ResourceRecordSets"], response_dict["body"] = split


def install(client: Any) -> None:
    """Parse the client's ``ListResourceRecordSets`` pages with `split_rows`."""
    events = getattr(getattr(client, "meta", None), "events", None)
    if events is not None:
        events.register(EVENT, before_parse)
