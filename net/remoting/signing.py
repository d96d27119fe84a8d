"""RocketMQ's ACL request signature (``AclClientRPCHook`` / ``PlainAccessValidator``), one definition for the
client that signs and the broker that checks.

The signature is HmacSHA1 over the request's extFields values sorted by key (``Signature`` and
``_UNIQUE_KEY_QUERY`` excluded) followed by the body, Base64; ``AccessKey`` names the account.
"""

from __future__ import annotations

import base64
import hmac
from collections.abc import Mapping

ACCESS_KEY, SIGNATURE = "AccessKey", "Signature"
UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"


def sign(ext_fields: Mapping[str, str], body: bytes, secret_key: str) -> str:
    """RocketMQ's request signature: HmacSHA1 over the sorted extField values (Signature excluded)
    followed by the body, Base64."""
    content = "".join(v for k, v in sorted(ext_fields.items()) if k not in (SIGNATURE, UNIQUE_KEY_QUERY))
    return base64.b64encode(hmac.digest(secret_key.encode(), content.encode() + (body or b""), "sha1")).decode()
