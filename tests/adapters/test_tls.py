"""adapters.tls: our HTTP clients trust the roots httpx would choose, checked as httpx checks them, but a
client that never opens a TLS connection never reads them (the real API server peer's TLS)."""

from __future__ import annotations

import base64
import ssl
from pathlib import Path

import certifi
import httpx
import pytest
import yaml

from adapters.tls import RootsOnFirstUse, client_tls_context
from tests.fixtures.kube_peer import KubePeer

pytestmark = pytest.mark.anyio


def _peer_ca(peer: KubePeer, where: Path) -> Path:
    """The peer's CA certificate as a file of its own (the kubeconfig may carry it inline)."""
    cluster = yaml.safe_load(peer.kubeconfig.read_text())["clusters"][0]["cluster"]
    if "certificate-authority" in cluster:
        return Path(cluster["certificate-authority"])
    path = where / "ca.crt"
    path.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    return path


def test_the_context_checks_certificates_and_host_names_as_httpx_does() -> None:
    context = client_tls_context(trust_env=False, env={})
    reference = httpx.create_ssl_context(trust_env=False)  # ssl.create_default_context(certifi's bundle)
    checks = ("protocol", "verify_mode", "check_hostname", "verify_flags", "options", "minimum_version")
    assert {n: getattr(context, n) for n in checks} == {n: getattr(reference, n) for n in checks}
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert not context.roots_loaded
    assert context.cert_store_stats()["x509_ca"] == 0  # nothing read yet


def test_the_roots_are_the_ones_httpx_chooses(tmp_path: Path) -> None:
    bundle, directory = tmp_path / "bundle.pem", tmp_path / "certs"
    assert client_tls_context(trust_env=False, env={"SSL_CERT_FILE": str(bundle)})._cafile == certifi.where()
    assert client_tls_context(trust_env=True, env={})._cafile == certifi.where()
    chosen = client_tls_context(trust_env=True, env={"SSL_CERT_FILE": str(bundle), "SSL_CERT_DIR": "x"})
    assert (chosen._cafile, chosen._capath) == (str(bundle), None)
    chosen = client_tls_context(trust_env=True, env={"SSL_CERT_DIR": str(directory)})
    assert (chosen._cafile, chosen._capath) == (None, str(directory))


def test_certifis_roots_are_loaded_on_the_first_wrap_and_only_once() -> None:
    context = client_tls_context(trust_env=False, env={})
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    context.wrap_bio(incoming, outgoing, server_hostname="example.org")
    assert context.roots_loaded
    loaded = context.cert_store_stats()["x509_ca"]
    assert loaded > 50  # certifi's bundle
    context.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname="example.org")
    assert context.cert_store_stats()["x509_ca"] == loaded


@pytest.mark.kube
async def test_a_server_the_roots_trust_is_reached_and_one_they_do_not_is_refused(
    kube_peer: KubePeer, tmp_path: Path
) -> None:
    ca = _peer_ca(kube_peer, tmp_path)
    trusting = client_tls_context(trust_env=True, env={"SSL_CERT_FILE": str(ca)})
    async with httpx.AsyncClient(verify=trusting, trust_env=False, timeout=30.0) as client:
        answer = await client.get(f"{kube_peer.server}/version")
    assert answer.status_code in (200, 401, 403)  # the handshake verified the peer's certificate
    assert isinstance(trusting, RootsOnFirstUse) and trusting.roots_loaded

    # trust_env=False: certifi's bundle, which does not hold the peer's CA
    default = client_tls_context(trust_env=False, env={"SSL_CERT_FILE": str(ca)})
    async with httpx.AsyncClient(verify=default, trust_env=False, timeout=30.0) as client:
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await client.get(f"{kube_peer.server}/version")
