"""SaslHandshake (key 17), SaslAuthenticate (key 36), DescribeUserScramCredentials (key 50) and
AlterUserScramCredentials (key 51).

The SASL exchange itself, and re-authentication, are the connection's authenticator's
(:mod:`broker.security.authenticator`); a SaslHandshake or SaslAuthenticate that reaches a
handler came on a listener without SASL, and is answered ILLEGAL_SASL_STATE, as Kafka's
KafkaApis answers it.

The SCRAM credential APIs read and write ``/config/users/<user>`` on the broker's coordinator
session (:mod:`broker.security.credentials`), with Kafka's per-user errors: a user named twice
(DUPLICATE_RESOURCE), an unknown mechanism (UNSUPPORTED_SASL_MECHANISM), too few or too many
iterations or an empty user, salt or salted password (UNACCEPTABLE_CREDENTIAL), a credential to
delete or describe that does not exist (RESOURCE_NOT_FOUND).
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from kio.schema.errors import ErrorCode

from broker.apis.admin_support import blocking
from broker.apis.base import Api, Reply, RequestContext
from broker.security.acls import Operation, ResourceType
from broker.security.credentials import CredentialError, alter, describe
from broker.wire import response_module
from coordinator.errors import CoordinatorError
from coordinator.metadata import MetadataClient
from kafkaclient.messages import build
from kafkaclient.security.scram import ScramCredential, credential_from_salted

if TYPE_CHECKING:
    from kio.schema.alter_user_scram_credentials.v0.request import ScramCredentialDeletion

    from broker.apis.messages import (
        AlterUserScramCredentialsRequest,
        AlterUserScramCredentialsResponse,
        DescribeUserScramCredentialsRequest,
        DescribeUserScramCredentialsResponse,
        SaslAuthenticateRequest,
        SaslAuthenticateResponse,
        SaslHandshakeRequest,
        SaslHandshakeResponse,
    )
    from broker.apis.services import AdminServices

__all__ = ["APIS", "MECHANISM_IDS", "mechanism_name"]

SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
DESCRIBE_USER_SCRAM_CREDENTIALS = 50
ALTER_USER_SCRAM_CREDENTIALS = 51

MECHANISM_IDS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
"""Kafka's ScramMechanism types on the wire (0 is UNKNOWN)."""


def mechanism_name(mechanism_id: int) -> str | None:
    return next((n for n, i in MECHANISM_IDS.items() if i == mechanism_id), None)


def _handshake(ctx: RequestContext[AdminServices],
               request: SaslHandshakeRequest) -> Reply[SaslHandshakeResponse]:
    module = response_module(SASL_HANDSHAKE, ctx.api_version)
    return build(module.SaslHandshakeResponse, error_code=ErrorCode.illegal_sasl_state,
                 mechanisms=())


def _authenticate(ctx: RequestContext[AdminServices],
                  request: SaslAuthenticateRequest) -> Reply[SaslAuthenticateResponse]:
    module = response_module(SASL_AUTHENTICATE, ctx.api_version)
    return build(module.SaslAuthenticateResponse, error_code=ErrorCode.illegal_sasl_state,
                 error_message="SaslAuthenticate request received after successful "
                               "authentication", auth_bytes=b"")


def _metadata(ctx: RequestContext) -> MetadataClient | None:
    admin = getattr(ctx.broker, "admin", None)
    return MetadataClient(admin.coordinator) if admin is not None else None


async def _describe(
        ctx: RequestContext[AdminServices], request: DescribeUserScramCredentialsRequest,
) -> DescribeUserScramCredentialsResponse:
    module = response_module(DESCRIBE_USER_SCRAM_CREDENTIALS, ctx.api_version)

    def result(user: str, code: ErrorCode, message: str | None,
               infos: tuple[Any, ...] = ()) -> Any:
        return build(module.DescribeUserScramCredentialsResult, user=user, error_code=code,
                     error_message=message, credential_infos=infos)

    def answer(code: ErrorCode, message: str | None, results: list[Any]) -> Any:
        return build(module.DescribeUserScramCredentialsResponse, throttle_time=timedelta(0),
                     error_code=code, error_message=message, results=tuple(results))

    if not ctx.authorized(Operation.DESCRIBE, ResourceType.CLUSTER):
        return answer(ErrorCode.cluster_authorization_failed, None, [])
    metadata = _metadata(ctx)
    if metadata is None:
        return answer(ErrorCode.coordinator_not_available, None, [])
    names = None if request.users is None else [u.name for u in request.users]
    counts = Counter(names or ())
    unique = [n for n in dict.fromkeys(names or ()) if counts[n] == 1]
    try:
        found = await blocking(ctx, describe, metadata, None if names is None else unique)
    except CoordinatorError as exc:
        return answer(ErrorCode.unknown_server_error, str(exc), [])
    results = []
    for user in (sorted(found) if names is None else dict.fromkeys(names)):
        if counts[user] > 1:
            results.append(result(user, ErrorCode.duplicate_resource,
                                  f"Cannot describe SCRAM credentials for the same user twice "
                                  f"in a single request: {user}"))
            continue
        infos = found.get(user, [])
        if not infos:
            results.append(result(user, ErrorCode.resource_not_found,
                                  f"Attempt to describe a user credential that does not "
                                  f"exist: {user}"))
            continue
        results.append(result(user, ErrorCode.none, None, tuple(
            build(module.CredentialInfo, mechanism=MECHANISM_IDS[i.mechanism],
                  iterations=i.iterations) for i in infos)))
    return answer(ErrorCode.none, None, results)


async def _alter(ctx: RequestContext[AdminServices],
                 request: AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse:
    # loaded already: the request was read with its classes (the one version served, v0)
    from kio.schema.alter_user_scram_credentials.v0.request import ScramCredentialUpsertion

    module = response_module(ALTER_USER_SCRAM_CREDENTIALS, ctx.api_version)
    errors: dict[str, tuple[ErrorCode, str | None]] = {}
    seen: Counter[tuple[str, int]] = Counter()
    users: dict[str, tuple[dict[str, ScramCredential], list[str]]] = {}
    for d in request.deletions:
        seen[(d.name, int(d.mechanism))] += 1
    for u in request.upsertions:
        seen[(u.name, int(u.mechanism))] += 1
    for (user, _), count in seen.items():
        if count > 1:
            errors[user] = (ErrorCode.duplicate_resource, "A user credential cannot be altered "
                            "twice in the same request")
    refused = not ctx.authorized(Operation.ALTER, ResourceType.CLUSTER)
    items: list[ScramCredentialDeletion | ScramCredentialUpsertion] = [
        *request.deletions, *request.upsertions]
    for item in items:
        user = item.name
        users.setdefault(user, ({}, []))
        if refused:
            errors[user] = (ErrorCode.cluster_authorization_failed, None)
        if user in errors:
            continue
        mech = mechanism_name(int(item.mechanism))
        if not user:
            errors[user] = (ErrorCode.unacceptable_credential, "Username must not be empty")
        elif mech is None:
            errors[user] = (ErrorCode.unsupported_sasl_mechanism,
                            "Unknown SCRAM mechanism")
        elif isinstance(item, ScramCredentialUpsertion):
            if not item.salt or not item.salted_password:
                errors[user] = (ErrorCode.unacceptable_credential,
                                "Salt and salted password must not be empty")
            else:
                users[user][0][mech] = credential_from_salted(
                    mech, bytes(item.salted_password), bytes(item.salt), int(item.iterations))
        else:
            users[user][1].append(mech)
    metadata = _metadata(ctx)

    def apply() -> None:
        for user, (upserts, deletions) in users.items():
            if user in errors:
                continue
            if metadata is None:
                errors[user] = (ErrorCode.coordinator_not_available, None)
                continue
            try:
                alter(metadata, user, upserts, deletions)
            except CredentialError as exc:
                errors[user] = (ErrorCode[exc.error.lower()], str(exc))
            except CoordinatorError as exc:
                errors[user] = (ErrorCode.unknown_server_error, str(exc))

    await blocking(ctx, apply)
    results = tuple(build(module.AlterUserScramCredentialsResult, user=user,
                          error_code=errors.get(user, (ErrorCode.none, None))[0],
                          error_message=errors.get(user, (ErrorCode.none, None))[1])
                    for user in users)
    return build(module.AlterUserScramCredentialsResponse, throttle_time=timedelta(0),
                 results=results)


APIS = [
    Api(key=SASL_HANDSHAKE, name="SaslHandshake", min_version=0, max_version=1,
        handle=_handshake),
    Api(key=SASL_AUTHENTICATE, name="SaslAuthenticate", min_version=0, max_version=2,
        handle=_authenticate),
    Api(key=DESCRIBE_USER_SCRAM_CREDENTIALS, name="DescribeUserScramCredentials",
        min_version=0, max_version=0, handle=_describe),
    Api(key=ALTER_USER_SCRAM_CREDENTIALS, name="AlterUserScramCredentials", min_version=0,
        max_version=0, handle=_alter),
]
