"""The `route53` provider (Amazon Route 53 through boto3).

    api.py       The `route53` provider's SDK boundary: `Route53Client`, the boto3 calls the ...
    apply.py     Writing change groups to one Route53 hosted zone, for the `route53` provider
    batch.py     Pure conversion and batching for the `route53` provider (no SDK, no network)
    health.py    Route53 health checks for the `route53` provider (optional: setting ...
    listing.py   A faster parse of ``ListResourceRecordSets`` pages (pure: bytes in, dicts out)
    provider.py  The `route53` provider: AWS Route53 hosted zones through boto3
    rest.py      A Route53 client for the calls a sync makes, with the standard library only

Nothing is imported here: each module is imported by name, so that importing one part
(a pure conversion, a listing) does not bring the rest or its SDK.
"""
