"""Provider tables: which geo codes and weights each DNS provider accepts.

Pure data plus three look-ups, used by `gitdns.core.validate`:

- Route53 (and the embedded `local`/`memory` stores, `rfc2136`, `coredns`): continent codes
  ``GEO-AF GEO-AN GEO-AS GEO-EU GEO-NA GEO-OC GEO-SA`` (Kuadrant's spelling of Route53's
  ``AF AN AS EU NA OC SA``) or an ISO 3166-1 alpha-2 country code.
- Google Cloud DNS geo routing: a Google Cloud region name such as ``europe-west1``.
- Azure Traffic Manager geographic routing: ``WORLD``, its region groups ``GEO-AF GEO-AN GEO-AS
  GEO-AP GEO-EU GEO-ME GEO-NA GEO-SA`` or an ISO 3166-1 alpha-2 country code.
"""

from __future__ import annotations

KNOWN_PROVIDERS = ("local", "memory", "rfc2136", "route53", "google", "azure", "coredns")

# Providers without routing policies: the loadbalanced layout needs `flattened: true` there.
# Azure DNS answers geo/weighted only through Traffic Manager profiles, which gitdns does not
# drive: its record sets hold no set identifiers, so it counts as plain.
PLAIN_PROVIDERS = frozenset({"rfc2136", "coredns", "azure"})

ROUTE53_CONTINENTS = frozenset({"GEO-AF", "GEO-AN", "GEO-AS", "GEO-EU", "GEO-NA", "GEO-OC", "GEO-SA"})
AZURE_REGIONS = frozenset(
    {"WORLD", "GEO-AF", "GEO-AN", "GEO-AS", "GEO-AP", "GEO-EU", "GEO-ME", "GEO-NA", "GEO-SA"}
)

ISO_COUNTRIES = frozenset(
    """
    AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ
    BR BS BT BV BW BY BZ CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM
    DO DZ EC EE EG EH ER ES ET FI FJ FK FM FO FR GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS
    GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT JE JM JO JP KE KG KH KI KM KN
    KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML MM MN MO MP MQ
    MR MS MT MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM
    PN PR PS PT PW PY QA RE RO RS RU RW SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV
    SX SY SZ TC TD TF TG TH TJ TK TL TM TN TO TR TT TV TW TZ UA UG UM US UY UZ VA VC VE VG VI
    VN VU WF WS YE YT ZA ZM ZW
    """.split()  # noqa: SIM905
)

GOOGLE_REGIONS = frozenset(
    """
    africa-south1 asia-east1 asia-east2 asia-northeast1 asia-northeast2 asia-northeast3
    asia-south1 asia-south2 asia-southeast1 asia-southeast2 australia-southeast1
    australia-southeast2 europe-central2 europe-north1 europe-north2 europe-southwest1
    europe-west1 europe-west2 europe-west3 europe-west4 europe-west6 europe-west8 europe-west9
    europe-west10 europe-west12 me-central1 me-central2 me-west1 northamerica-northeast1
    northamerica-northeast2 northamerica-south1 southamerica-east1 southamerica-west1
    us-central1 us-east1 us-east4 us-east5 us-south1 us-west1 us-west2 us-west3 us-west4
    """.split()  # noqa: SIM905
)

_ROUTE53_STYLE = ROUTE53_CONTINENTS | ISO_COUNTRIES
_GEO_TABLES: dict[str, frozenset[str]] = {
    "route53": _ROUTE53_STYLE,
    "local": _ROUTE53_STYLE,
    "memory": _ROUTE53_STYLE,
    "rfc2136": _ROUTE53_STYLE,
    "coredns": _ROUTE53_STYLE,
    "google": GOOGLE_REGIONS,
    "azure": AZURE_REGIONS | ISO_COUNTRIES,
}
_GEO_HINTS = {
    "google": "a Google Cloud region such as europe-west1 or us-east1",
    "azure": "WORLD, a region group (GEO-AF GEO-AN GEO-AS GEO-AP GEO-EU GEO-ME GEO-NA GEO-SA) "
    "or an ISO 3166-1 alpha-2 country code such as US",
}
_ROUTE53_HINT = (
    "a continent code (GEO-AF GEO-AN GEO-AS GEO-EU GEO-NA GEO-OC GEO-SA) "
    "or an ISO 3166-1 alpha-2 country code such as US or DE, upper-case"
)

# Inclusive weight ranges of weighted routing per provider.
WEIGHT_RANGES: dict[str, tuple[int, int]] = {
    "route53": (0, 255),
    "local": (0, 255),
    "memory": (0, 255),
    "rfc2136": (0, 255),
    "coredns": (0, 255),
    "google": (0, 1000),
    "azure": (1, 1000),
}


def valid_geo(provider: str, code: str) -> bool:
    """Whether ``provider`` accepts the geo code ``code`` (unknown providers accept anything)."""
    table = _GEO_TABLES.get(provider)
    return table is None or code in table


def geo_hint(provider: str) -> str:
    """What geo codes ``provider`` accepts, in words."""
    return _GEO_HINTS.get(provider, _ROUTE53_HINT)


def weight_range(provider: str) -> tuple[int, int]:
    """The inclusive weight range of ``provider`` (unknown providers: Route53's)."""
    return WEIGHT_RANGES.get(provider, WEIGHT_RANGES["route53"])
