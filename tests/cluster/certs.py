"""The test bed's certificates: one CA, serving certificates for 127.0.0.1 and client certificates.

The API server, the kubelet's port and every operator's webhook server serve a
certificate of this CA; the control plane's clients present one (`O=system:masters` for the
administrator). The service-account signing key is a separate RSA pair.

Made to pass the operators' cert-controller, which re-creates certificates it does not accept
(and then no longer matches the webhook configurations): RSA keys in PKCS#1, a CA whose DNS names
include each operator's CA name, and certificates valid far longer than its 90-day look-ahead.
"""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path
from typing import Sequence, Tuple

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

VALID_DAYS = 3650
#: The CA names the operators' cert-controllers check the CA certificate against.
CA_NAMES = ("training-operator-ca", "kubeflow-trainer-ca", "jobset-ca", "kueue-ca")
KEY_BITS = 2048


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    parts = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        parts.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(parts)


def _write_pem(path: Path, data: bytes, private: bool = False) -> Path:
    path.write_bytes(data)
    if private:
        path.chmod(0o600)
    return path


def _key_pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM,
                             serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


class Authority:
    """A certificate authority whose files live in `directory` (`ca.crt`, `ca.key`)."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.cert_path = self.directory / "ca.crt"
        key_path = self.directory / "ca.key"
        if self.cert_path.exists():
            self._key = serialization.load_pem_private_key(key_path.read_bytes(), None)
            self._cert = x509.load_pem_x509_certificate(self.cert_path.read_bytes())
            return
        self._key = rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)
        now = datetime.datetime.now(datetime.timezone.utc)
        self._cert = (x509.CertificateBuilder()
                      .subject_name(_name("kfdist-test-bed-ca")).issuer_name(_name("kfdist-test-bed-ca"))
                      .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
                      .not_valid_before(now - datetime.timedelta(minutes=5))
                      .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
                      .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                      .add_extension(x509.SubjectAlternativeName(
                          [x509.DNSName(n) for n in CA_NAMES]), critical=False)
                      .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True,
                                                   crl_sign=True, content_commitment=False,
                                                   key_encipherment=False, data_encipherment=False,
                                                   key_agreement=False, encipher_only=False,
                                                   decipher_only=False), critical=True)
                      .sign(self._key, hashes.SHA256()))
        _write_pem(key_path, _key_pem(self._key), private=True)
        _write_pem(self.cert_path, self._cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, stem: str, common_name: str, organization: str | None = None,
              hosts: Sequence[str] = (), directory: Path | None = None) -> Tuple[Path, Path]:
        """Writes `STEM.crt` and `STEM.key`: a certificate for a client or (with `hosts`) a server.

        Args:
          stem: File name without its suffix.
          common_name: The subject's CN (the user name, for a client certificate).
          organization: The subject's O (the user's group).
          hosts: DNS names and IP addresses the certificate serves; none for a client.
          directory: Where to write (the CA's directory by default).

        Returns:
          The certificate's and the key's paths.
        """
        directory = Path(directory or self.directory)
        directory.mkdir(parents=True, exist_ok=True)
        key = rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)
        now = datetime.datetime.now(datetime.timezone.utc)
        usages = [x509.ExtendedKeyUsageOID.CLIENT_AUTH]
        builder = (x509.CertificateBuilder().subject_name(_name(common_name, organization))
                   .issuer_name(self._cert.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True))
        if hosts:
            usages.append(x509.ExtendedKeyUsageOID.SERVER_AUTH)
            names = []
            for host in hosts:
                try:
                    names.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    names.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = (builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
                .sign(self._key, hashes.SHA256()))
        cert_path = _write_pem(directory / f"{stem}.crt", cert.public_bytes(serialization.Encoding.PEM))
        key_path = _write_pem(directory / f"{stem}.key", _key_pem(key), private=True)
        return cert_path, key_path


def service_account_keys(directory: Path) -> Tuple[Path, Path]:
    """Writes the service-account token signing pair, `sa.key` and `sa.pub` (RSA)."""
    directory = Path(directory)
    key_path, pub_path = directory / "sa.key", directory / "sa.pub"
    if not key_path.exists():
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        _write_pem(key_path, _key_pem(key), private=True)
        _write_pem(pub_path, key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return key_path, pub_path
