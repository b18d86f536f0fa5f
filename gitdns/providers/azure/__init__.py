"""The `azure` provider (Azure DNS through azure-mgmt-dns).

    api.py       The `azure` provider's SDK boundary: `AzureDnsApi`, the five calls the provider ...
    native.py    Pure conversion and batching for the `azure` provider (no SDK, no network)
    provider.py  The `azure` provider: Azure DNS through ``azure-mgmt-dns``

Nothing is imported here: each module is imported by name, so that importing one part
(a pure conversion, a listing) does not bring the rest or its SDK.
"""
