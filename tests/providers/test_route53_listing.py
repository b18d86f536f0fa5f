"""`route53_listing.split_rows` builds exactly the dicts botocore's own parser builds for a
``ListResourceRecordSets`` page, every field of the service model included, and leaves
botocore the paging markers; anything it does not expect falls back to botocore."""

from __future__ import annotations

from typing import Any
from xml.sax.saxutils import escape

from botocore.loaders import Loader
from botocore.model import ServiceModel
from botocore.parsers import RestXMLParser
from hypothesis import given
from hypothesis import strategies as st

from gitdns.providers.route53 import listing as rl
from gitdns.providers.route53.batch import from_native

NS = "https://route53.amazonaws.com/doc/2013-04-01/"
_MODEL = ServiceModel(Loader().load_service_model("route53", "service-2"))
_OUTPUT = _MODEL.operation_model("ListResourceRecordSets").output_shape

ROWS = [
    "<Name>example.com.</Name><Type>NS</Type><TTL>172800</TTL><ResourceRecords><ResourceRecord>"
    "<Value>ns-1.awsdns-1.com.</Value></ResourceRecord><ResourceRecord><Value>ns-2.awsdns-2.net.</Value>"
    "</ResourceRecord></ResourceRecords>",
    "<Name>\\052.example.com.</Name><Type>A</Type><TTL>60</TTL><ResourceRecords><ResourceRecord>"
    "<Value>192.0.2.1</Value></ResourceRecord></ResourceRecords>",
    "<Name>t.example.com.</Name><Type>TXT</Type><TTL>300</TTL><ResourceRecords><ResourceRecord>"
    "<Value>\"a &amp; b &lt;c&gt; \\\"q\\\" \\303\\251\"</Value></ResourceRecord></ResourceRecords>",
    "<Name>w.example.com.</Name><Type>CNAME</Type><SetIdentifier>s1</SetIdentifier><Weight>120</Weight>"
    "<TTL>60</TTL><ResourceRecords><ResourceRecord><Value>a.example.com.</Value></ResourceRecord>"
    "</ResourceRecords><HealthCheckId>0f4b5c0e-hc</HealthCheckId>",
    "<Name>g.example.com.</Name><Type>CNAME</Type><SetIdentifier>US-CA</SetIdentifier><GeoLocation>"
    "<CountryCode>US</CountryCode><SubdivisionCode>CA</SubdivisionCode></GeoLocation><TTL>300</TTL>"
    "<ResourceRecords><ResourceRecord><Value>us.example.com.</Value></ResourceRecord></ResourceRecords>",
    "<Name>g.example.com.</Name><Type>CNAME</Type><SetIdentifier>EU</SetIdentifier><GeoLocation>"
    "<ContinentCode>EU</ContinentCode></GeoLocation><TTL>300</TTL><ResourceRecords><ResourceRecord>"
    "<Value>eu.example.com.</Value></ResourceRecord></ResourceRecords>",
    "<Name>alias.example.com.</Name><Type>A</Type><AliasTarget><HostedZoneId>Z2FDTNDATAQYW2</HostedZoneId>"
    "<DNSName>d111111abcdef8.cloudfront.net.</DNSName><EvaluateTargetHealth>false</EvaluateTargetHealth>"
    "</AliasTarget>",
    "<Name>f.example.com.</Name><Type>A</Type><SetIdentifier>primary</SetIdentifier><Failover>PRIMARY"
    "</Failover><TTL>60</TTL><ResourceRecords><ResourceRecord><Value>192.0.2.7</Value></ResourceRecord>"
    "</ResourceRecords><HealthCheckId>hc-1</HealthCheckId>",
    "<Name>m.example.com.</Name><Type>A</Type><SetIdentifier>m1</SetIdentifier><MultiValueAnswer>true"
    "</MultiValueAnswer><TTL>60</TTL><ResourceRecords><ResourceRecord><Value>192.0.2.8</Value>"
    "</ResourceRecord></ResourceRecords>",
    "<Name>l.example.com.</Name><Type>A</Type><SetIdentifier>eu</SetIdentifier><Region>eu-west-1</Region>"
    "<TTL>60</TTL><ResourceRecords><ResourceRecord><Value>192.0.2.9</Value></ResourceRecord></ResourceRecords>",
    "<Name>c.example.com.</Name><Type>A</Type><SetIdentifier>c1</SetIdentifier><CidrRoutingConfig>"
    "<CollectionId>col-1</CollectionId><LocationName>office</LocationName></CidrRoutingConfig><TTL>60</TTL>"
    "<ResourceRecords><ResourceRecord><Value>192.0.2.10</Value></ResourceRecord></ResourceRecords>",
    "<Name>p.example.com.</Name><Type>A</Type><SetIdentifier>p1</SetIdentifier><GeoProximityLocation>"
    "<Coordinates><Latitude>49.22</Latitude><Longitude>-74.01</Longitude></Coordinates><Bias>-10</Bias>"
    "</GeoProximityLocation><TTL>60</TTL><ResourceRecords><ResourceRecord><Value>192.0.2.11</Value>"
    "</ResourceRecord></ResourceRecords>",
    "<Name>e.example.com.</Name><Type>TXT</Type><TTL>60</TTL><ResourceRecords><ResourceRecord><Value></Value>"
    "</ResourceRecord></ResourceRecords><TrafficPolicyInstanceId>tp-1</TrafficPolicyInstanceId>",
    "<Name>n.example.com.</Name><Type>A</Type><SetIdentifier>n1</SetIdentifier><GeoLocation/><TTL>60</TTL>"
    "<ResourceRecords/>",
]


def page(rows: list[str], tail: str = "<IsTruncated>true</IsTruncated><MaxItems>300</MaxItems>"
         "<NextRecordName>z.example.com.</NextRecordName><NextRecordType>A</NextRecordType>"
         "<NextRecordIdentifier>s9</NextRecordIdentifier>") -> bytes:
    sets = "".join(f"<ResourceRecordSet>{r}</ResourceRecordSet>" for r in rows)
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<ListResourceRecordSetsResponse xmlns="{NS}">'
            f"<ResourceRecordSets>{sets}</ResourceRecordSets>{tail}</ListResourceRecordSetsResponse>").encode()


def botocore_parse(body: bytes) -> dict[str, Any]:
    parsed: dict[str, Any] = RestXMLParser().parse({"body": body, "headers": {}, "status_code": 200}, _OUTPUT)
    parsed.pop("ResponseMetadata", None)
    return parsed


def fast_parse(body: bytes) -> dict[str, Any]:
    """What the client returns with the hook: botocore's parse of the rest, updated with ours."""
    response: dict[str, Any] = {"body": body, "headers": {}, "status_code": 200}
    custom: dict[str, Any] = {}
    rl.before_parse(response_dict=response, customized_response_dict=custom)
    assert custom, "the fast path did not take the page"
    parsed = botocore_parse(response["body"])
    parsed.update(custom)
    return parsed


def test_every_modelled_field_parses_as_botocore_parses_it() -> None:
    body = page(ROWS)
    assert fast_parse(body) == botocore_parse(body)
    assert [from_native(r) for r in fast_parse(body)["ResourceRecordSets"]] == \
        [from_native(r) for r in botocore_parse(body)["ResourceRecordSets"]]


def test_last_and_empty_pages() -> None:
    last = page(ROWS[:2], tail="<IsTruncated>false</IsTruncated><MaxItems>300</MaxItems>")
    assert fast_parse(last) == botocore_parse(last)
    empty = page([], tail="<IsTruncated>false</IsTruncated><MaxItems>300</MaxItems>")
    assert fast_parse(empty) == botocore_parse(empty) and fast_parse(empty)["ResourceRecordSets"] == []


@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), max_size=40), max_size=4))
def test_text_with_markup_characters_parses_as_botocore_parses_it(values: list[str]) -> None:
    records = "".join(f"<ResourceRecord><Value>{escape(v)}</Value></ResourceRecord>" for v in values)
    body = page([f"<Name>x.example.com.</Name><Type>TXT</Type><TTL>1</TTL><ResourceRecords>{records}"
                 "</ResourceRecords>"])
    assert fast_parse(body) == botocore_parse(body)


def test_unexpected_pages_are_left_to_botocore() -> None:
    assert rl.split_rows(b"<ListResourceRecordSetsResponse><IsTruncated>false</IsTruncated>"
                         b"</ListResourceRecordSetsResponse>") is None
    assert rl.split_rows(page(ROWS[:1]).replace(b"</ResourceRecordSets>", b"")) is None
    assert rl.split_rows(page(["<Name>x.</Name><Type>A</Type><TTL>soon</TTL>"])) is None  # not an int
    response: dict[str, Any] = {"body": page(ROWS[:1]), "headers": {}, "status_code": 400}
    custom: dict[str, Any] = {}
    rl.before_parse(response_dict=response, customized_response_dict=custom)
    assert custom == {} and response["body"] == page(ROWS[:1])  # errors are botocore's to parse
