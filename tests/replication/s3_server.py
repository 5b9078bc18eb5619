"""moto's standalone S3-compatible server on a loopback port, started and stopped by the tests
that use it (the S3 remote storage and metadata managers talk to it over HTTP, as to any
S3-compatible endpoint). Credentials are dummies set for the test's process only."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

__all__ = ["s3_endpoint", "s3_url"]


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """The URL of a moto server on 127.0.0.1 (a free port), for one test module."""
    server_mod = pytest.importorskip("moto.server")
    saved = {k: os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                            "AWS_DEFAULT_REGION", "AWS_EC2_METADATA_DISABLED")}
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
                      AWS_DEFAULT_REGION="us-east-1", AWS_EC2_METADATA_DISABLED="true")
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture
def s3_url(s3_endpoint: str) -> str:
    """``s3://<a new bucket>/tiered``: a bucket of its own for each test."""
    import boto3

    bucket = f"t-{uuid.uuid4().hex[:20]}"
    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket=bucket)
    return f"s3://{bucket}/tiered"
