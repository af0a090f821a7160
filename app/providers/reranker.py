"""A cross-encoder reranker over HTTP, in the shape TEI and Jina-style servers share:
POST {base_url}/rerank {"query", "texts"} → [{"index", "score"}, …]."""

from __future__ import annotations

from collections.abc import Sequence

import httpx

from app.core.ports import RerankerUnavailable


class HttpReranker:
    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._client = httpx.AsyncClient(base_url=base_url, timeout=timeout_s, transport=transport)

    async def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        try:
            response = await self._client.post(
                "/rerank", json={"query": query, "texts": list(documents)}
            )
            response.raise_for_status()
            ranked = response.json()
            scores = [0.0] * len(documents)
            for item in ranked:
                scores[int(item["index"])] = float(item["score"])
        except (httpx.HTTPError, KeyError, IndexError, TypeError, ValueError) as error:
            raise RerankerUnavailable(f"{type(error).__name__}: {error}") from error
        return scores

    async def aclose(self) -> None:
        await self._client.aclose()
