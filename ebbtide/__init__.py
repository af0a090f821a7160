"""Ebbtide's Python client (`ebbtide.client`) and agent-framework adapters
(`ebbtide.langgraph`, `ebbtide.pydantic_ai`). The service itself is the `app` package."""

from ebbtide.client import AsyncEbbtide, Ebbtide, EbbtideError, Retries

__all__ = ["AsyncEbbtide", "Ebbtide", "EbbtideError", "Retries"]
