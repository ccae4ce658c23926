"""Stub: the request ids OpenRLHF hands to the (stand-in) engine."""

import uuid


def random_uuid() -> str:
    return uuid.uuid4().hex
