"""SCRAM (RFC 5802/7677) against the RFC 7677 test vector, and Kafka's credential format."""

from __future__ import annotations

import base64

import pytest

from weir.security import scram
from weir.security.scram import ScramClient, ScramCredential, ScramError, ScramServer

# RFC 7677 section 3: user "user", password "pencil".
C_NONCE = "rOprNGfwEbeRWgbNEkqO"
S_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
SERVER_FIRST = (b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _credential() -> ScramCredential:
    return scram.make_credential("SCRAM-SHA-256", "pencil", 4096, SALT)


def test_rfc7677_client() -> None:
    client = ScramClient("SCRAM-SHA-256", "user", "pencil", client_nonce=C_NONCE)
    assert client.first() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    assert client.final(SERVER_FIRST) == CLIENT_FINAL
    client.verify(SERVER_FINAL)
    with pytest.raises(ScramError):
        client.verify(b"v=" + base64.b64encode(b"x" * 32))


def test_rfc7677_server() -> None:
    server = ScramServer("SCRAM-SHA-256", server_nonce=S_NONCE)
    assert server.client_first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO") == "user"
    assert server.server_first(_credential()) == SERVER_FIRST
    assert server.client_final(CLIENT_FINAL) == SERVER_FINAL


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_round_trip_and_wrong_password(mechanism: str) -> None:
    stored = scram.make_credential(mechanism, "s3cret, with = signs", 8192)
    for password, ok in (("s3cret, with = signs", True), ("wrong", False)):
        client = ScramClient(mechanism, "al,i=ce", password)
        server = ScramServer(mechanism)
        assert server.client_first(client.first()) == "al,i=ce"
        final = client.final(server.server_first(stored))
        if ok:
            client.verify(server.client_final(final))
        else:
            with pytest.raises(ScramError):
                server.client_final(final)


def test_kafka_credential_string() -> None:
    cred = _credential()
    text = cred.to_kafka_string()
    assert text.startswith("salt=W22ZaJ0SNY7soEsUEjb6gQ==,stored_key=")
    assert text.endswith(",iterations=4096")
    assert ScramCredential.from_kafka_string(text) == cred
    with pytest.raises(ValueError):
        ScramCredential.from_kafka_string("salt=abc")


@pytest.mark.parametrize("message", [
    b"", b"garbage", b"p=tls-unique,,n=user,r=abc", b"n,,n=,r=abc", b"n,a=other,n=user,r=abc",
    b"\xff\xfe", b"n,,n=user",
])
def test_bad_client_first(message: bytes) -> None:
    with pytest.raises(ScramError):
        ScramServer("SCRAM-SHA-256").client_first(message)


def test_bad_client_final() -> None:
    server = ScramServer("SCRAM-SHA-256", server_nonce=S_NONCE)
    server.client_first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    server.server_first(_credential())
    for final in (b"junk", CLIENT_FINAL.replace(b"r=rOpr", b"r=XOpr"),
                  CLIENT_FINAL.replace(b"c=biws", b"c=eSws"),
                  CLIENT_FINAL[:-10] + b"AAAAAAAAA=", b"c=biws,r=x,p=!!!"):
        with pytest.raises(ScramError):
            server.client_final(final)


def test_extensions_are_parsed() -> None:
    server = ScramServer("SCRAM-SHA-512")
    assert server.client_first(b"n,,n=user,r=abc,tokenauth=true") == "user"
    assert server.token_auth


def test_iterations_bounds() -> None:
    with pytest.raises(ScramError):
        scram.make_credential("SCRAM-SHA-256", "x", 100)
    with pytest.raises(ScramError):
        scram.make_credential("SCRAM-SHA-1", "x")


class _FakeZk:
    """The three ZkClient calls the credential store makes, over a dict of znodes."""

    def __init__(self) -> None:
        self.nodes: dict[str, dict[str, str]] = {}
        self.reads = 0
        self.changes: list[str] = []

    def get_entity_config(self, entity: str, name: str) -> dict[str, str]:
        self.reads += 1
        return dict(self.nodes.get(f"{entity}/{name}", {}))

    def set_entity_config(self, entity: str, name: str, config: dict[str, str]) -> None:
        self.nodes[f"{entity}/{name}"] = dict(config)
        self.changes.append(f"{entity}/{name}")

    def get_children(self, path: str) -> list[str]:
        prefix = path.removeprefix("/config/") + "/"
        return sorted(k[len(prefix):] for k in self.nodes if k.startswith(prefix))


def test_credential_store_in_kafkas_layout():
    from weir.security.credentials import ScramCredentialStore

    zk = _FakeZk()
    store = ScramCredentialStore(zk)
    cred = scram.make_credential("SCRAM-SHA-512", "pw")
    store.alter("bob@corp", {"SCRAM-SHA-512": cred}, set())
    assert zk.changes == ["users/bob%40corp"]  # Kafka's Sanitizer: URL-encoded node names
    from weir.security.credentials import sanitize

    assert sanitize("a b*c~d.e-f_g") == "a%20b%2Ac%7Ed.e-f_g"  # as Java's URLEncoder
    assert zk.nodes["users/bob%40corp"] == {"SCRAM-SHA-512": cred.to_kafka_string()}
    assert store.credential("bob@corp", "SCRAM-SHA-512") == cred
    assert store.credential("bob@corp", "SCRAM-SHA-256") is None
    assert store.users() == ["bob@corp"] and store.mechanisms("bob@corp") == {
        "SCRAM-SHA-512": 4096}
    reads = zk.reads
    for i in range(50):  # unknown names are read, not cached
        assert store.credential(f"nobody{i}", "SCRAM-SHA-512") is None
    assert zk.reads == reads + 50 and set(store._cache) <= {"bob@corp"}
    store.alter("bob@corp", {}, {"SCRAM-SHA-512"})
    assert store.credential("bob@corp", "SCRAM-SHA-512") is None
    zk.nodes["users/bob%40corp"] = {"SCRAM-SHA-512": "garbage"}
    store.invalidate()
    assert store.credential("bob@corp", "SCRAM-SHA-512") is None  # logged, not raised


def test_a_client_nonce_sent_twice_in_front_is_accepted_as_kafka_does() -> None:
    """librdkafka before 2.6.1 (Debian's kcat) puts its own nonce once more in front of the
    combined nonce in client-final; Kafka's ScramSaslServer accepts a nonce that ends with
    the server's (3.8.1), and the proof still decides."""
    import hashlib
    import hmac

    server = ScramServer("SCRAM-SHA-256", server_nonce=S_NONCE)
    server.client_first(b"n,,n=user,r=" + C_NONCE.encode())
    server_first = server.server_first(_credential())
    without = f"c=biws,r={C_NONCE}{C_NONCE}{S_NONCE}"
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", SALT, 4096)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    auth = b",".join((b"n=user,r=" + C_NONCE.encode(), server_first, without.encode()))
    signature = hmac.new(hashlib.sha256(client_key).digest(), auth, "sha256").digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True)))
    assert server.client_final(without.encode() + b",p=" + proof).startswith(b"v=")
    other = ScramServer("SCRAM-SHA-256", server_nonce=S_NONCE)
    other.client_first(b"n,,n=user,r=" + C_NONCE.encode())
    other.server_first(_credential())
    with pytest.raises(ScramError, match="invalid nonce"):  # not ending with the server's
        other.client_final(f"c=biws,r={C_NONCE}{S_NONCE}x,p=".encode() + proof)
