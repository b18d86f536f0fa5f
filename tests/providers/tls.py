"""A test certificate authority for the loopback fakes: provider endpoints must be HTTPS.

`loopback_tls()` makes (once per process) a CA and a server certificate for ``127.0.0.1`` and
``localhost``, written to a temporary directory; `server_context()` wraps a fake's listening
socket; the SDKs trust the CA through ``REQUESTS_CA_BUNDLE`` (google-auth, azure-core) and
``AWS_CA_BUNDLE`` (botocore), which `LoopbackTLS.env()` gives (tests/providers/conftest.py sets it
for every provider test).
"""

from __future__ import annotations

import atexit
import datetime
import functools
import ipaddress
import shutil
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class LoopbackTLS:
    ca_file: Path
    cert_file: Path
    key_file: Path

    def env(self) -> dict[str, str]:
        """The variables that make the SDKs trust the test CA."""
        return {"REQUESTS_CA_BUNDLE": str(self.ca_file), "AWS_CA_BUNDLE": str(self.ca_file)}


@functools.lru_cache(maxsize=1)
def loopback_tls() -> LoopbackTLS:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory = Path(tempfile.mkdtemp(prefix="gitdns-test-tls-"))
    atexit.register(shutil.rmtree, directory, True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gitdns test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
          .not_valid_after(now + datetime.timedelta(days=2))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False, data_encipherment=False,
                                       key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")])
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(san, critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    out = LoopbackTLS(directory / "ca.pem", directory / "server.pem", directory / "server.key")
    out.ca_file.write_bytes(ca.public_bytes(pem))
    out.cert_file.write_bytes(cert.public_bytes(pem))
    out.key_file.write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
    return out


def server_context() -> ssl.SSLContext:
    """A server-side context with the test certificate."""
    tls = loopback_tls()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tls.cert_file, tls.key_file)
    return context


def client_context() -> ssl.SSLContext:
    """A client-side context trusting the test CA (for the tests' own requests)."""
    return ssl.create_default_context(cafile=str(loopback_tls().ca_file))
