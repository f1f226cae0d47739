"""The `token-allowlist` example authenticator for es, in Python.

SASL OAUTHBEARER (RFC 7628) with opaque bearer tokens: the configuration lists,
for each accepted token, the SHA-256 of the token (hex) and the id of the es API
key it logs in as. The broker keeps only digests, so its config never holds a
token; a token whose digest is not listed, or whose key is revoked, is refused.
Built into a WebAssembly component of the `authenticator` world of `wit/` by
`plugins/examples/build.sh` with componentize-py; the session resource lives in
`auth.py` (componentize-py looks an exported interface's resources up in a module
named after the interface).

Config: `tokens`, comma-separated `SHA256_HEX=KEY_ID` pairs.
"""

import auth
from componentize_py_types import Err
from wit_world import exports
from wit_world.exports.lifecycle import PluginInfo

CONFIG_KEYS = ["tokens"]


class Lifecycle(exports.Lifecycle):
    def info(self) -> PluginInfo:
        return PluginInfo(
            name="token-allowlist",
            version="0.1.0",
            description="OAUTHBEARER with opaque tokens listed by SHA-256 (Python).",
            config_keys=CONFIG_KEYS,
        )

    def configure(self, config) -> None:
        values = dict(config)
        unknown = sorted(set(values) - set(CONFIG_KEYS))
        if unknown:
            raise Err(f"unknown config key {unknown[0]!r}; known: {', '.join(CONFIG_KEYS)}")
        allowed = {}
        for pair in values.get("tokens", "").split(","):
            if not pair.strip():
                continue
            digest, sep, key_id = pair.strip().partition("=")
            digest = digest.lower()
            if not sep or len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                raise Err(f"'tokens': {pair.strip()!r} is not SHA256_HEX=KEY_ID")
            if not key_id:
                raise Err(f"'tokens': {digest[:8]}... names no key id")
            allowed[bytes.fromhex(digest)] = key_id
        if not allowed:
            raise Err("'tokens' must list at least one SHA256_HEX=KEY_ID pair")
        auth.ALLOWED = allowed


class Auth(exports.Auth):
    def mechanisms(self):
        return ["OAUTHBEARER"]
