"""An OpenAI-compatible chat model behind the ChatModel port (better notes)."""

from __future__ import annotations

from typing import Any

from app.core.ports import ChatModelUnavailable


class OpenAIChatModel:
    def __init__(
        self, *, base_url: str, api_key: str, model: str, timeout_s: float, client: Any = None
    ) -> None:
        from openai import AsyncOpenAI

        self._client = client or AsyncOpenAI(
            base_url=base_url, api_key=api_key, timeout=timeout_s, max_retries=0
        )
        self._model = model

    async def complete(self, system: str, user: str) -> str:
        try:
            response = await self._client.chat.completions.create(
                model=self._model,
                messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                temperature=0,
            )
        except Exception as error:  # network, HTTP status, timeout: all mean "unavailable"
            raise ChatModelUnavailable(f"{type(error).__name__}: {error}") from error
        content = response.choices[0].message.content if response.choices else None
        if not content:
            raise ChatModelUnavailable("the chat model returned no text")
        return str(content)

    async def aclose(self) -> None:
        await self._client.close()
