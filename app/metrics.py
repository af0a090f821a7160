"""Every Prometheus object, defined once (docs/OBSERVABILITY.md), and how a turn's result
feeds them. Label values come from small fixed sets (levels, outcomes, stages, reasons,
route templates): never session or tenant ids."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import Counter, Gauge, Histogram

from app.core.results import TurnRecallSummary, TurnResult

TURNS = Counter(
    "ebbtide_turns_total", "Turns processed, by the level found at the start.", ["level"]
)
OFFLOADS = Counter("ebbtide_offloads_total", "Offload batches written.")
CHUNKS_OFFLOADED = Counter("ebbtide_chunks_offloaded_total", "Chunks written by offloads.")
TOKENS_FREED = Counter("ebbtide_offload_freed_tokens", "Prompt tokens freed by offloads.")
FALLBACKS = Counter("ebbtide_fallbacks_total", "Degraded paths taken, by reason.", ["reason"])
WATERMARK = Histogram(
    "ebbtide_watermark_ratio",
    "The prompt without recalled text / the watermark base (C − r − R), before any offload.",
    buckets=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.65, 0.7, 0.8, 0.9, 0.95, 1.0, 1.2),
)
TOKEN_BUCKETS = (250, 500, 1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000, 256000)
PROMPT_TOKENS = Histogram(
    "ebbtide_prompt_tokens", "Tokens of the prompt a turn answers.", buckets=TOKEN_BUCKETS
)
INJECTED_TOKENS = Histogram(
    "ebbtide_recall_injected_tokens",
    "Tokens of recalled text a turn injects.",
    buckets=(0, 100, 250, 500, 1000, 1500, 2000, 3000, 4000),
)
RECALL_OUTCOMES = Counter(
    "ebbtide_recall_outcomes_total",
    "Recall per turn: hit, pointed (pointers only), miss (searched, nothing injected), "
    "skipped, fallback.",
    ["outcome"],
)
FINAL_K = Histogram(
    "ebbtide_recall_final_k", "Chunks injected by a turn's recall.", buckets=(0, 1, 2, 3, 5, 8)
)
RERANK_TOP_SCORE = Histogram(
    "ebbtide_rerank_top_score",
    "Fused score of the best injected chunk (the vector score's units, docs/DESIGN.md §4).",
    buckets=(0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.5),
)
STAGE_SECONDS = Histogram(
    "ebbtide_stage_seconds",
    "Server time per stage of a turn.",
    ["stage"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
NOTES_REBUILDS = Counter(
    "ebbtide_notes_rebuilds_total", "Notes rendered again (at an offload or a retry).", ["source"]
)
PROPOSED_FACTS = Counter(
    "ebbtide_proposed_facts_total",
    "Facts the chat model proposed: kept (their message says them) or dropped.",
    ["outcome"],
)
TURN_SECONDS = Histogram("ebbtide_turn_seconds", "Server time spent on one turn.")
PROVIDER_PROMPT_TOKENS = Counter(
    "ebbtide_provider_prompt_tokens",
    "Prompt tokens the clients' providers reported for Ebbtide's prompts.",
)
PROVIDER_CACHED_TOKENS = Counter(
    "ebbtide_provider_cached_prompt_tokens",
    "Of those, tokens the providers' prompt caches served (over the above: the hit share).",
)
PROXY_CALLS = Counter(
    "ebbtide_proxy_calls",
    "Calls through the OpenAI- and Anthropic-compatible endpoints, by route and outcome "
    "(recorded; passed: a model list or token count answered; upstream_error: the "
    "provider's 4xx/5xx; unreachable; timeout; cut: the stream ended before it said it was "
    "complete; unrecorded: the reply could not be stored).",
    ["route", "outcome"],
)
UPSTREAM_RETRIES = Counter(
    "ebbtide_proxy_upstream_retries_total",
    "Proxy calls sent again on a new connection after the last one failed before the "
    "upstream's status line, by httpx's error (a kept-alive connection closed, a refusal).",
    ["error"],
)
PROXY_UPSTREAM_SECONDS = Histogram(
    "ebbtide_proxy_upstream_seconds",
    "Time from forwarding a call to the upstream's status line (streams: first byte).",
    ["route"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
HTTP_REQUESTS = Counter(
    "ebbtide_http_requests_total", "HTTP requests by route template.", ["method", "route", "status"]
)
HTTP_SECONDS = Histogram(
    "ebbtide_http_request_seconds", "HTTP request latency by route template.", ["method", "route"]
)
SESSIONS_PURGED = Counter(
    "ebbtide_sessions_purged_total", "Sessions deleted by the retention purge."
)
EMBEDDER_REFUSED = Counter(
    "ebbtide_embedder_refused_total",
    "Embedder calls refused at admission: busy (no room) or unavailable (breaker open).",
    ["reason"],
)
EMBEDDING_QUEUE_CHUNKS = Gauge(
    "ebbtide_embedding_queue_chunks", "Chunks waiting for vectors (the embedding queue's depth)."
)
EMBEDDING_QUEUE_AGE = Gauge(
    "ebbtide_embedding_queue_oldest_seconds", "Age of the oldest chunk waiting for vectors."
)
EMBEDDING_LAG = Histogram(
    "ebbtide_embedding_lag_seconds",
    "From a chunk's write to its vectors' write.",
    buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600),
)
EMBEDDED_UNITS = Counter("ebbtide_embedded_units_total", "Units the embedding worker embedded.")
EMBEDDED_WORDS = Counter("ebbtide_embedded_words_total", "Words the embedding worker embedded.")
EMBEDDING_BATCH_SECONDS = Histogram(
    "ebbtide_embedding_batch_seconds", "The embedder's time on one batch of the queue."
)
EMBEDDING_WORKER_YIELD = Counter(
    "ebbtide_embedding_worker_yield_seconds_total",
    "Time the in-process embedding worker waited for turns in flight to finish.",
)
EMBEDDING_BATCHES = Counter(
    "ebbtide_embedding_batches_total", "Queue batches, by outcome.", ["outcome"]
)
RECALL_PENDING = Counter(
    "ebbtide_recall_pending_chunks_total",
    "Chunks a search found waiting for vectors, so searched by their words only.",
)
RECALL_INLINE_EMBEDDED = Counter(
    "ebbtide_recall_inline_embedded_chunks_total",
    "Queued chunks of the asking session a recall embedded itself before searching.",
)
EMBEDDING_BATCH_SIZE = Gauge(
    "ebbtide_embedding_batch_size_chunks",
    "The worker's current batch size: halved after a batch that failed or ran long.",
)
QUERY_CACHE = Counter(
    "ebbtide_query_vector_cache_total", "Query vectors asked of the cache, by outcome.", ["outcome"]
)
TURN_STATEMENTS = Histogram(
    "ebbtide_turn_db_statements",
    "Round trips one turn made to the database (statements, each transaction's BEGIN and "
    "COMMIT), by kind of turn: quiet, recall, offload, replay.",
    ["kind"],
    buckets=(2, 4, 6, 8, 10, 12, 16, 20, 30, 50, 100),
)
REMEMBERED = Counter("ebbtide_remembered_total", "Points stored through remember.")
FORGOTTEN_CHUNKS = Counter("ebbtide_forgotten_chunks_total", "Chunks deleted by confirmed forgets.")

# The turn's `timings_ms` keys, grouped into the stages the dashboards show.
STAGES = {
    "plan": "tokenize",
    "embed": "embed",
    "recall_rewrite": "rewrite",
    "recall_embed": "embed",
    "recall_embed_queued": "embed",
    "recall_search": "search",
    "recall_rerank": "rerank",
    "notes": "notes",
    "assemble": "assemble",
    "db_read": "db",
    "db_write": "db",
}


def recall_outcome(recall: TurnRecallSummary) -> str:
    """A degraded search first: it may also end skipped (its evidence already held). A turn
    given pointers but no evidence is `pointed`."""
    if recall.fallback:
        return "fallback"
    if recall.skipped_reason:
        return "skipped"
    if recall.hits:
        return "hit"
    return "pointed" if recall.pointers else "miss"


def stage_seconds(timings_ms: Mapping[str, float]) -> dict[str, float]:
    seconds: dict[str, float] = {}
    for key, stage in STAGES.items():
        if key in timings_ms:
            seconds[stage] = seconds.get(stage, 0.0) + timings_ms[key] / 1000
    return seconds


def observe_turn(result: TurnResult) -> None:
    usage, offload, recall = result.usage, result.offload, result.recall
    TURNS.labels(level=usage.level.value).inc()
    WATERMARK.observe(usage.trigger_ratio)
    PROMPT_TOKENS.observe(usage.prompt_tokens)
    TURN_SECONDS.observe(result.timings_ms.get("total", 0.0) / 1000)
    for stage, seconds in stage_seconds(result.timings_ms).items():
        STAGE_SECONDS.labels(stage=stage).observe(seconds)
    if offload.triggered:
        OFFLOADS.inc()
        CHUNKS_OFFLOADED.inc(len(offload.chunk_ids))
        TOKENS_FREED.inc(offload.tokens_freed)
    RECALL_OUTCOMES.labels(outcome=recall_outcome(recall)).inc()
    if not recall.skipped_reason:
        FINAL_K.observe(recall.final_k)
        INJECTED_TOKENS.observe(recall.injected_tokens)
    if recall.hits:
        RERANK_TOP_SCORE.observe(max(hit.score for hit in recall.hits))
    if result.notes.updated:
        NOTES_REBUILDS.labels(source=result.notes.source or "extractive").inc()
    PROPOSED_FACTS.labels(outcome="kept").inc(result.notes.proposed_kept)
    PROPOSED_FACTS.labels(outcome="dropped").inc(result.notes.proposed_dropped)
    observe_provider_usage(usage.observed_prompt_tokens, usage.observed_cached_tokens)
    for reason in {offload.fallback, recall.fallback} - {None}:
        FALLBACKS.labels(reason=reason).inc()


def observe_provider_usage(prompt_tokens: int | None, cached_tokens: int | None) -> None:
    """The provider's report of a prompt and of its cached share (the cache-hit metric)."""
    if prompt_tokens is not None and cached_tokens is not None:
        PROVIDER_PROMPT_TOKENS.inc(prompt_tokens)
        PROVIDER_CACHED_TOKENS.inc(min(cached_tokens, prompt_tokens))


def count_proxy_call(route: str, outcome: str) -> None:
    """One proxy call's outcome (recorded, passed, upstream_error, unavailable, timeout, cut,
    unrecorded)."""
    PROXY_CALLS.labels(route=route, outcome=outcome).inc()


THROTTLED = Counter(
    "ebbtide_throttled_total",
    "Calls refused with 429 by a tenant's limits (app/services/throttle.py): turns, proxy "
    "calls or bytes per minute, or a full line of large calls.",
    ["limit"],
)
LARGE_CALLS = Gauge(
    "ebbtide_large_calls", "Large calls (by body size) in progress or waiting in line.", ["state"]
)
