"""The `rfc2136` provider (RFC 2136 UPDATE and AXFR with TSIG, through dnspython).

    native.py    Pure conversion and message building for the `rfc2136` provider (no network)
    provider.py  The `rfc2136` provider: RFC 2136 dynamic update signed with TSIG, read by AXFR ...

Nothing is imported here: each module is imported by name, so that importing one part
(a pure conversion, a listing) does not bring the rest or its SDK.
"""
