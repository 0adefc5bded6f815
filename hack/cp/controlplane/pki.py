"""Certificates, keys and kubeconfigs, signed by a CA made at `up`."""

from __future__ import annotations

import base64
import datetime
import ipaddress
import json
import ssl
from pathlib import Path
from typing import Any


def make_pki(pki: Path) -> None:
    """Two CAs (the cluster's, and the front proxy's for request-header authentication), the API
    server's serving certificate, client certificates, and the service-account signing key."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    pki.mkdir(parents=True, exist_ok=True)
    hosts = ["localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"]
    hosts += ["kubernetes.default.svc.cluster.local", "127.0.0.1", "10.0.0.1"]
    issued = {  # name: (issuer, common name, organization, server names)
        "apiserver": ("ca", "kube-apiserver", None, hosts),
        "admin": ("ca", "ferryman-admin", "system:masters", None),
        "controller-manager": ("ca", "system:kube-controller-manager", None, None),
        "front-proxy-client": ("front-proxy-ca", "front-proxy-client", None, None),
        # how the API server authenticates to kubelet for `kubectl logs/exec` (a node's kubelet
        # authorizes by webhook, so an anonymous call would be refused)
        "apiserver-kubelet-client": ("ca", "kube-apiserver-kubelet-client", "system:masters", None),
    }
    cas = {}
    for name in ("ca", "front-proxy-ca"):
        key = ec.generate_private_key(ec.SECP256R1())
        cas[name] = (key, sign(key, f"ferryman-{name}", None, key, None))
        write_pair(pki, name, cas[name][1], key)
    for name, (issuer, common_name, organization, sans) in issued.items():
        key = ec.generate_private_key(ec.SECP256R1())
        ca_key, ca = cas[issuer]
        write_pair(pki, name, sign(key, common_name, organization, ca_key, ca, sans=sans), key)
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    write_key(pki / "sa.key", sa_key)
    public = sa_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    (pki / "sa.pub").write_bytes(public)


def issue(pki: Path, name: str, common_name: str, organization: str | None = None) -> None:
    """A client certificate <pki>/<name>.{crt,key} signed by the cluster's CA (<pki>/ca.*)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    ca = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((pki / "ca.key").read_bytes(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    write_pair(pki, name, sign(key, common_name, organization, ca_key, ca), key)


def sign(
    key: Any,
    common_name: str,
    organization: str | None,
    ca_key: Any,
    ca: Any,
    *,
    sans: list[str] | None = None,
) -> Any:
    """An X.509 certificate for `key`, signed by ca_key (self-signed when ca is None)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    subject = x509.Name(attributes)
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.subject if ca else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(x509.BasicConstraints(ca=ca is None, path_length=None), critical=True)
    )
    if ca is None:
        usage = x509.KeyUsage(False, False, False, False, False, True, True, False, False)
        builder = builder.add_extension(usage, critical=True)
    else:
        oids = [ExtendedKeyUsageOID.SERVER_AUTH if sans else ExtendedKeyUsageOID.CLIENT_AUTH]
        builder = builder.add_extension(x509.ExtendedKeyUsage(oids), critical=False)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names(sans)), False)
    return builder.sign(ca_key, hashes.SHA256())


def alt_names(hosts: list[str]) -> list[Any]:
    from cryptography import x509

    names: list[Any] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def write_pair(pki: Path, name: str, cert: Any, key: Any) -> None:
    from cryptography.hazmat.primitives import serialization

    (pki / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    write_key(pki / f"{name}.key", key)


def write_key(path: Path, key: Any) -> None:
    from cryptography.hazmat.primitives import serialization

    encoding, pkcs8 = serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8
    data = key.private_bytes(encoding, pkcs8, serialization.NoEncryption())
    path.touch(mode=0o600)
    path.write_bytes(data)


def write_kubeconfig(path: Path, server: str, pki: Path, user: str) -> None:
    """A kubeconfig (JSON, which is YAML) with everything embedded; one context, `ferryman`."""

    def data(name: str) -> str:
        return base64.b64encode((pki / name).read_bytes()).decode()

    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "ferryman",
                "cluster": {"server": server, "certificate-authority-data": data("ca.crt")},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": data(f"{user}.crt"),
                    "client-key-data": data(f"{user}.key"),
                },
            }
        ],
        "contexts": [{"name": "ferryman", "context": {"cluster": "ferryman", "user": user}}],
        "current-context": "ferryman",
    }
    path.touch(mode=0o600)
    path.write_text(json.dumps(config, indent=2) + "\n")


def admin_context(pki: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
    context.load_cert_chain(pki / "admin.crt", pki / "admin.key")
    return context
