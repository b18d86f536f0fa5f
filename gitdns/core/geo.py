"""Geo codes: the sets of codes DNS services accept for geo routing, as pure data.

Which set a provider type uses is declared in its entry of `gitdns.core.providertypes`
(``Capabilities.geo``); this module only holds the sets and their descriptions:

- `ROUTE53_STYLE`: continent codes ``GEO-AF GEO-AN GEO-AS GEO-EU GEO-NA GEO-OC GEO-SA``
  (Kuadrant's spelling of Route53's ``AF AN AS EU NA OC SA``) or an ISO 3166-1 alpha-2 country
  code.  Route53, and the stores that keep Kuadrant's codes (`local`, `memory`) or take the
  flattened form (`rfc2136`).
- `GOOGLE_STYLE`: a Google Cloud region name such as ``europe-west1`` (Cloud DNS geo routing).
- `AZURE_STYLE`: Traffic Manager geographic routing: ``WORLD``, its region groups ``GEO-AF
  GEO-AN GEO-AS GEO-AP GEO-EU GEO-ME GEO-NA GEO-SA`` or an ISO 3166-1 alpha-2 country code.
- `ANY_CODE`: not checked here (the service that finally publishes the records checks).
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True, slots=True)
class GeoCodes:
    """The geo codes a service accepts: ``codes`` None accepts any code; ``hint`` says which
    in words (for validation messages and the docs)."""

    name: str
    codes: frozenset[str] | None
    hint: str

    def accepts(self, code: str) -> bool:
        return self.codes is None or code in self.codes


ROUTE53_STYLE = GeoCodes(
    "route53",
    ROUTE53_CONTINENTS | ISO_COUNTRIES,
    "a continent code (GEO-AF GEO-AN GEO-AS GEO-EU GEO-NA GEO-OC GEO-SA) "
    "or an ISO 3166-1 alpha-2 country code such as US or DE, upper-case",
)
GOOGLE_STYLE = GeoCodes("google", GOOGLE_REGIONS, "a Google Cloud region such as europe-west1 or us-east1")
AZURE_STYLE = GeoCodes(
    "azure",
    AZURE_REGIONS | ISO_COUNTRIES,
    "WORLD, a region group (GEO-AF GEO-AN GEO-AS GEO-AP GEO-EU GEO-ME GEO-NA GEO-SA) "
    "or an ISO 3166-1 alpha-2 country code such as US",
)
ANY_CODE = GeoCodes("any", None, "any code (checked by the service that publishes the records)")
