"""Domain errors. No HTTP here: `app/api/errors.py` maps each class to a status code.

Every error carries a stable machine `code`, a human `message` and structured `details`
(for example the offending field), so the client can tell what to fix.
"""

from __future__ import annotations

from typing import Any


class DomainError(Exception):
    code = "domain_error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class UnsupportedParameter(DomainError):
    """A provider request field the proxy cannot honour while it manages the context (several
    choices, a conversation the provider keeps)."""

    code = "unsupported_parameter"


class InvalidTurn(DomainError):
    """The turn's messages break the conversation's structure."""

    code = "invalid_turn"


class OrphanToolResult(InvalidTurn):
    """A `tool` message whose `tool_call_id` no assistant call in the window asked for."""

    code = "orphan_tool_result"


class DuplicateToolCall(InvalidTurn):
    """Two tool calls share an id, so a result could not say which one it answers."""

    code = "duplicate_tool_call_id"


class ConflictingSystemPrompt(InvalidTurn):
    """The system prompt came both as `system` and as leading system messages."""

    code = "conflicting_system_prompt"


class UnknownModel(DomainError):
    """No window is known for the model and the request gave no `context_window`."""

    code = "unknown_model"


class TooManyMessages(DomainError):
    code = "too_many_messages"


class MessageTooLarge(DomainError):
    code = "message_too_large"


class UnreadableBlob(DomainError):
    """A payload stored before media were checked whose data is not base64."""

    code = "unreadable_blob"


class UnsupportedMedia(DomainError):
    """An inline image, clip or file that could not be stored and served back safely: a media
    type outside the accepted ones or not a clean `type/subtype` token, or data that is not
    base64."""

    code = "unsupported_media"


class OverLimit(DomainError):
    """A request parameter asks for more than the service's configured limit allows."""

    code = "over_limit"


class RememberTooLong(DomainError):
    code = "remember_too_long"


class RememberEmpty(DomainError):
    """Nothing but white space to remember."""

    code = "remember_empty"


class RateLimited(DomainError):
    """Too many calls in the window; `details.retry_after_s` says when to try again."""

    code = "rate_limited"


class LargeCallsWaiting(RateLimited):
    """The tenant's line of large calls is full; `details.retry_after_s` says when to retry."""

    code = "too_many_large_calls"


class InvalidForget(DomainError):
    """A forget call must name a chunk, a turn range or a pending id to confirm."""

    code = "invalid_forget"


class ForgetRequestNotFound(DomainError):
    """No pending forget with that id in this session (never made, done, or expired)."""

    code = "forget_request_not_found"


class SessionNotFound(DomainError):
    code = "session_not_found"


class FactsNotCarried(DomainError):
    """`carry_facts` named a session the tenant does not have, or ids that are not active
    facts of it (forgotten, superseded, never there): nothing is carried."""

    code = "facts_not_carried"


class ChunkNotFound(DomainError):
    code = "chunk_not_found"


class TurnNotFound(DomainError):
    """The session recorded no such turn (or it was written before turns were recorded)."""

    code = "turn_not_found"


class BlobNotFound(DomainError):
    """No offloaded payload of the session has that hash."""

    code = "blob_not_found"


class IdempotencyKeyReused(DomainError):
    """The same Idempotency-Key was sent before with a different body."""

    code = "idempotency_key_reused"


class ReplayForgotten(DomainError):
    """The turn under this Idempotency-Key was answered; a forget deleted the answer since."""

    code = "replay_forgotten"


class SessionBusy(DomainError):
    """Other turns of the same session kept winning the race; the client may retry."""

    code = "session_busy"


class Unauthenticated(DomainError):
    """No valid bearer key, while the service has keys configured."""

    code = "unauthenticated"


class Forbidden(DomainError):
    """The key is valid but lacks the scope the operation needs."""

    code = "forbidden"


class UnstorableValue(DomainError):
    """The database refused a value of the request (a second guard behind the validators)."""

    code = "unstorable_value"


class DatabaseUnavailable(DomainError):
    code = "database_unavailable"


class InvalidPolicyOverride(DomainError):
    """A per-session policy override breaks the watermark ordering or a bound."""

    code = "invalid_policy"


class InvalidWindow(DomainError):
    """The reserve leaves no room: reserve_tokens must be smaller than context_window."""

    code = "invalid_window"


class TurnExceedsBudget(DomainError):
    """The turn cannot fit the budget C − r even with each of its text messages stored as a
    chunk and stubbed: the system prompt and tools, the notes and what cannot be stubbed
    (images, files, tool calls) take too much of the window."""

    code = "turn_exceeds_budget"


class InvalidEncryptionKey(DomainError):
    """A configured encryption key is not a Fernet key."""

    code = "invalid_encryption_key"


class EncryptionKeyMissing(DomainError):
    """Stored text is encrypted and the service has no key configured."""

    code = "encryption_key_missing"


class EncryptionKeyRejected(DomainError):
    """Stored text was encrypted with a key that is no longer configured."""

    code = "encryption_key_rejected"


class UpstreamUnavailable(DomainError):
    """The proxy's upstream model API could not be reached (refused, reset, DNS)."""

    code = "upstream_unavailable"


class UpstreamTimeout(UpstreamUnavailable):
    """The upstream model API did not answer within the proxy's timeout."""

    code = "upstream_timeout"


class MissingSession(DomainError):
    """A proxy call named no session: no `X-Ebbtide-Session` header and no fallback field."""

    code = "missing_session"


class InvalidSessionId(DomainError):
    """A proxy call named its session with something that is no session id."""

    code = "invalid_session_id"
