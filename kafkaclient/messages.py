"""Building kio's message objects across versions.

Every request partctl sends and every response its brokers answer is one of kio's generated
classes, one per API version. A field exists in some versions only; :func:`build` takes the
values a caller has for any version and keeps the ones the chosen version carries.
"""

from __future__ import annotations

import dataclasses
import sys
from functools import cache
from types import ModuleType
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.static.protocol import RequestPayload, ResponsePayload

__all__ = ["build", "request_module", "request_schema", "response_schema"]


@cache
def request_schema(api_key: int, version: int) -> type[RequestPayload]:
    """kio's request class of ``api_key`` at ``version``, looked up once: kio's own lookup
    resolves the class's import path on every call, which a follower's fetcher paid per
    fetch."""
    return load_request_schema(api_key, version)


@cache
def response_schema(api_key: int, version: int) -> type[ResponsePayload]:
    """kio's response class of ``api_key`` at ``version``, looked up once."""
    return load_response_schema(api_key, version)


def request_module(api_key: int, version: int) -> ModuleType:
    """The kio module of a request version (its nested classes are named alike in all)."""
    return sys.modules[request_schema(api_key, version).__module__]


@cache
def _fields(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def build(cls: type, **values: Any) -> Any:
    """An instance of a kio class from the values this version has: a field another version
    added or dropped is left out (and gets its default, or the version does not carry it)."""
    names = _fields(cls)
    return cls(**{k: v for k, v in values.items() if k in names})
