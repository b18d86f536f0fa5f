"""Shared fixtures: the worked example of docs/records.md (two clusters, one loadbalanced host) as store records.

Before anything else, the cloud SDKs are told never to look for instance metadata
(169.254.169.254, metadata.google.internal): set here, at import, so that every test module,
fixture and subprocess (agents, moto_server) of the session inherits it.  Their default
credential chains hold nothing and end without a request: a test that wants credentials
gives them (a secret, a fake endpoint, a fake TokenCredential).  A developer's own cloud
credentials never reach the tests.
"""

from __future__ import annotations

import os

import pytest

from gitdns.core.records import RecordSet

CLOSED = "127.0.0.1:1"  # nothing listens there: a connection is refused at once


def _no_cloud_metadata() -> None:
    os.environ.update({
        # botocore: no IMDS credential or region lookup
        "AWS_EC2_METADATA_DISABLED": "true",
        # google-auth: no GCE check (its metadata server, were it asked anyway, on loopback);
        # no gcloud configuration (a path that cannot exist)
        "NO_GCE_CHECK": "true",
        "GCE_METADATA_HOST": CLOSED,
        "GCE_METADATA_IP": CLOSED,
        "CLOUDSDK_CONFIG": os.path.join(os.devnull, "gcloud"),
        # azure-identity: DefaultAzureCredential tries the environment alone (no managed identity,
        # no az/azd/pwsh); IMDS, were a ManagedIdentityCredential asked, on loopback
        "AZURE_TOKEN_CREDENTIALS": "EnvironmentCredential",
        "AZURE_POD_IDENTITY_AUTHORITY_HOST": f"http://{CLOSED}",
    })
    for name in ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                 "GOOGLE_APPLICATION_CREDENTIALS", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET", "AZURE_TENANT_ID",
                 "AZURE_CLIENT_CERTIFICATE_PATH", "AZURE_USERNAME", "AZURE_PASSWORD", "AZURE_FEDERATED_TOKEN_FILE",
                 "AZURE_AUTHORITY_HOST", "IDENTITY_ENDPOINT", "MSI_ENDPOINT", "IMDS_ENDPOINT"):
        os.environ.pop(name, None)


_no_cloud_metadata()


def worked_example_records() -> tuple[RecordSet, ...]:
    """Zone example.com, host api.example.com: 8 data records (no ownership TXT)."""
    host, klb = "api.example.com", "klb.api.example.com"
    eu, us = f"geo-eu.{klb}", f"us.{klb}"
    a_eu, a_us = f"1hrxie-30ics1.{klb}", f"17ol5y-30ics1.{klb}"
    return (
        RecordSet(host, "CNAME", 300, (klb,)),
        RecordSet(klb, "CNAME", 300, (eu,), set_id="GEO-EU", geo="GEO-EU"),
        RecordSet(klb, "CNAME", 300, (us,), set_id="US", geo="US"),
        RecordSet(klb, "CNAME", 300, (eu,), set_id="default", geo="*"),
        RecordSet(eu, "CNAME", 60, (a_eu,), set_id=a_eu, weight=120),
        RecordSet(us, "CNAME", 60, (a_us,), set_id=a_us, weight=120),
        RecordSet(a_eu, "A", 60, ("1.1.1.1",)),
        RecordSet(a_us, "A", 60, ("2.2.2.2",)),
    )


@pytest.fixture
def worked_example() -> tuple[RecordSet, ...]:
    return worked_example_records()
