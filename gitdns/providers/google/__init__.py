"""The `google` provider (Google Cloud DNS through google-cloud-dns).

    api.py       The `google` provider's API boundary: `CloudDnsApi`, the three REST calls the ...
    native.py    Pure conversion and change building for the `google` provider (no SDK, no network)
    provider.py  The `google` provider: Google Cloud DNS (REST API v1 through the google-cloud-dns ...

Nothing is imported here: each module is imported by name, so that importing one part
(a pure conversion, a listing) does not bring the rest or its SDK.
"""
