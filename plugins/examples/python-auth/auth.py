"""The session resource of the `token-allowlist` example (see token_allowlist.py):
one OAUTHBEARER handshake, a single client message."""

import hashlib
import hmac

from wit_world.exports.auth import StepResult_Done, StepResult_Failed
from wit_world.imports import auth_host

# Digest of each accepted token -> the key id it logs in as; set by `configure`.
ALLOWED = {}
# Longest client message read; a longer one is refused before parsing.
MESSAGE_BYTES_MAX = 8 * 1024


def bearer_token(message):
    """The token of `gs2-header \\x01 *(key=value \\x01) \\x01` (RFC 7628)."""
    if len(message) > MESSAGE_BYTES_MAX:
        raise ValueError("message too long")
    parts = message.decode("utf-8").split("\x01")
    if not (parts[0].startswith("n,") or parts[0].startswith("y,")):
        raise ValueError("no GS2 header (channel binding is not supported)")
    for kv in parts[1:]:
        if kv.startswith("auth="):
            scheme, _, token = kv[len("auth="):].partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    raise ValueError("no `auth=Bearer` in the message")


def lookup(token):
    """The key id of `token`, comparing digests in constant time."""
    digest = hashlib.sha256(token.encode()).digest()
    found = None
    # Every entry is compared, so the time does not tell which one matched.
    for allowed, key_id in ALLOWED.items():
        if hmac.compare_digest(allowed, digest):
            found = key_id
    return found


class Session:
    def __init__(self, mechanism: str) -> None:
        self.done = False

    def step(self, response: bytes):
        # OAUTHBEARER is one client message; anything after it is a protocol error.
        if self.done:
            return StepResult_Failed("OAUTHBEARER takes one message")
        self.done = True
        try:
            token = bearer_token(response)
        except (ValueError, UnicodeDecodeError) as e:
            return StepResult_Failed(str(e))
        key_id = lookup(token)
        if key_id is None:
            return StepResult_Failed("the token is not on the allowlist")
        if not auth_host.key_exists(key_id):
            return StepResult_Failed(f"`{key_id}` is not an active key")
        return StepResult_Done(key_id)
