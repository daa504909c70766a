"""`livecam serve` over TLS, with a self-signed certificate made here (cryptography, which
aiortc already needs): a real aiortc WHIP client that trusts the certificate gets swapped
frames back over HTTPS; one that does not trust it is refused before any offer is read."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from pathlib import Path

import pytest

from livecam.remote.client import WhipError
from tests.helpers.leak_clips import leak_clips, read_index
from tests.helpers.whip_session import LoopedSession, Server, start_server

pytestmark = pytest.mark.slow


def _self_signed(folder: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "livecam test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


async def _first_swapped(server: Server, trust: ssl.SSLContext | None) -> bool:
    frames = [frame for frame, _ in leak_clips()["still_2"].frames()][:30]
    async with LoopedSession(server.url, server.tokens["alice"], frames, ssl=trust) as session:
        client = session.client
        await client.connect()
        while True:
            image = await client.received(timeout_s=60)
            assert image is not None, "the server ended the video"
            if read_index(image) is not None:
                return True


def test_whip_over_tls_with_a_self_signed_certificate(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    server = start_server(tmp_path / "serve", max_sessions=1, tls=(cert, key))
    try:
        assert server.url.startswith("https://")
        with pytest.raises(WhipError):  # the system's CAs do not know this certificate
            asyncio.run(_first_swapped(server, None))
        trusted = ssl.create_default_context(cafile=str(cert))
        assert asyncio.run(_first_swapped(server, trusted))
    finally:
        server.stop()
