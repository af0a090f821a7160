"""Every Prometheus object, defined once. No session or tenant ids as label values."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

TURNS = Counter(
    "ebbtide_turns_total", "Turns processed, by the level found at the start.", ["level"]
)
OFFLOADS = Counter("ebbtide_offloads_total", "Offload batches written.")
CHUNKS_OFFLOADED = Counter("ebbtide_chunks_offloaded_total", "Chunks written by offloads.")
TOKENS_FREED = Counter("ebbtide_offload_freed_tokens", "Prompt tokens freed by offloads.")
FALLBACKS = Counter("ebbtide_fallbacks_total", "Degraded paths taken, by reason.", ["reason"])
WATERMARK = Histogram(
    "ebbtide_watermark_ratio",
    "Prompt tokens / budget at the start of a turn.",
    buckets=(0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.65, 0.7, 0.8, 0.9, 0.95, 1.0, 1.2),
)
TURN_SECONDS = Histogram("ebbtide_turn_seconds", "Server time spent on one turn.")
SESSIONS_PURGED = Counter(
    "ebbtide_sessions_purged_total", "Sessions deleted by the retention purge."
)
REMEMBERED = Counter("ebbtide_remembered_total", "Points stored through remember.")
FORGOTTEN_CHUNKS = Counter("ebbtide_forgotten_chunks_total", "Chunks deleted by confirmed forgets.")
