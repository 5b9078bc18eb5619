"""Populated requests of every api and version this broker serves, built from kio's schemas:
every field holds a value (arrays two elements, nullable fields a value, tagged fields away
from their defaults), so that an encoding exercises every length and count the schema has.
Used by the wire check's tests and the protocol fuzzer."""

from __future__ import annotations

import dataclasses
import random
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    classify_field,
    get_schema_field_type,
)
from kio.static.primitive import i32Timedelta, i64Timedelta

from broker.apis import ApiRegistry
from broker.wire import request_class

__all__ = ["sample", "served", "served_requests"]


def _primitive(kafka_type: str, rng: random.Random) -> Any:
    match kafka_type:
        case "bool":
            return rng.random() < 0.5
        case "int8" | "uint8":
            return rng.randrange(0, 100)
        case "int16" | "uint16" | "int32" | "uint32" | "int64" | "uint64":
            return rng.randrange(0, 1000)
        case "float64":
            return rng.random()
        case "string":
            return "".join(rng.choice("abcxyz-._") for _ in range(rng.randrange(1, 6)))
        case "bytes" | "records":
            return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 6)))
        case "uuid":
            return uuid.UUID(int=rng.getrandbits(128))
        case "error_code":
            return ErrorCode.none
        case "timedelta_i32":
            return i32Timedelta.parse(timedelta(milliseconds=rng.randrange(1, 10_000)))
        case "timedelta_i64":
            return i64Timedelta.parse(timedelta(milliseconds=rng.randrange(1, 10_000)))
        case "datetime_i64":
            return datetime(2026, 1, 1, tzinfo=UTC)
    raise ValueError(f"no sample for kafka type {kafka_type!r}")


def sample(cls: type, rng: random.Random | None = None, *, items: int = 2) -> Any:
    """An instance of a kio entity class with every field set (arrays of ``items``)."""
    rng = rng or random.Random(0)
    values: dict[str, Any] = {}
    for field in dataclasses.fields(cls):
        kind = classify_field(field)
        if isinstance(kind, EntityField | EntityTupleField):
            def one(inner: type = kind.type_) -> Any:
                return sample(inner, rng, items=items)
        else:
            def one(kafka_type: str = get_schema_field_type(field)) -> Any:
                return _primitive(kafka_type, rng)
        values[field.name] = tuple(one() for _ in range(items)) if kind.is_array else one()
    return cls(**values)


def served(registry: ApiRegistry) -> Iterator[tuple[int, int]]:
    """Every (api key, version) the registry serves."""
    for api in registry.values():
        for version in range(api.min_version, api.max_version + 1):
            yield api.key, version


def served_requests(registry: ApiRegistry) -> Iterator[tuple[int, int, type]]:
    for key, version in served(registry):
        yield key, version, request_class(key, version)
