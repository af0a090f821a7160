"""The application factory. The lifespan builds the engine and the providers once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from app.api.errors import BodySizeLimit, install_error_handlers
from app.api.mcp import MCP_PATH, PostOnly, bearer_from_headers, build_mcp
from app.api.observability import RequestObserver
from app.api.pages import guard_docs_pages
from app.api.proxy import PROXY_PREFIX, document_bodies
from app.api.proxy import router as proxy_router
from app.api.routes import router
from app.api.traffic import CountTraffic
from app.api.ui import install_inspector
from app.bench.floor import router as floor_router
from app.core.ports import ChatModel, Embedder, QueryRewriter, Reranker
from app.providers.embedders import (
    BackgroundLocalEmbedder,
    HashEmbedder,
    LocalEmbedder,
    OpenAIEmbedder,
)
from app.providers.llm import OpenAIChatModel
from app.providers.llm_recall import LlmQueryRewriter, LlmReranker
from app.providers.reranker import HttpReranker
from app.providers.tokenizer import counter_for_model, default_counter
from app.providers.upstream import HttpUpstream
from app.services.context import ServiceContext
from app.services.embedding_queue import run_worker
from app.services.maintenance import purge_periodically
from app.settings import Settings, get_settings
from app.store.database import Database
from app.store.embedded import supervise_embedded
from app.store.models import EMBEDDING_DIMENSION
from app.store.sealing import sealer_for, use_sealer


class MissingSetting(RuntimeError):
    """A provider was chosen without the setting it needs."""


def build_embedder(settings: Settings) -> Embedder:
    config = settings.embedder
    if config.dimension != EMBEDDING_DIMENSION:
        raise MissingSetting(
            f"the schema stores {EMBEDDING_DIMENSION}-dim vectors; configure an embedder of that "
            "dimension (OpenAI text-embedding-3 models accept dimensions=384 with "
            "EBBTIDE_EMBEDDER__SEND_DIMENSIONS=true)"
        )
    if config.kind == "hash":
        return HashEmbedder(config.dimension)
    if config.kind == "openai":
        if not config.base_url:
            raise MissingSetting("EBBTIDE_EMBEDDER__BASE_URL is required for the openai embedder")
        return OpenAIEmbedder(
            base_url=config.base_url,
            api_key=config.api_key,
            model=config.model,
            dimension=config.dimension,
            query_model=config.query_model,
            send_dimensions=config.send_dimensions,
            timeout_s=config.timeout_s,
        )
    return LocalEmbedder()


def build_chat_model(settings: Settings) -> ChatModel | None:
    config = settings.llm
    if not config.base_url:
        return None
    return OpenAIChatModel(
        base_url=config.base_url,
        api_key=config.api_key,
        model=config.model,
        timeout_s=config.timeout_s,
    )


def build_reranker(settings: Settings, chat_model: ChatModel | None) -> Reranker | None:
    config = settings.reranker
    if config.kind == "fusion":
        return None
    if config.kind == "llm":
        if chat_model is None:
            raise MissingSetting("EBBTIDE_LLM__BASE_URL is required for the llm reranker")
        return LlmReranker(chat_model)
    if not config.base_url:
        raise MissingSetting("EBBTIDE_RERANKER__BASE_URL is required for the http reranker")
    return HttpReranker(config.base_url, timeout_s=config.timeout_s)


def build_query_rewriter(settings: Settings, chat_model: ChatModel | None) -> QueryRewriter | None:
    if not settings.llm.rewrite_queries:
        return None
    if chat_model is None:
        raise MissingSetting("EBBTIDE_LLM__BASE_URL is required to rewrite queries with it")
    return LlmQueryRewriter(chat_model)


def configure_encryption(settings: Settings) -> None:
    """Installs the process's encryption keys (app/store/sealing.py); none: plain text."""
    use_sealer(sealer_for(settings.encryption.key_list()))


def build_worker_embedder(settings: Settings) -> Embedder | None:
    """The in-process worker's own embedder: the local model in a niced process (None: the
    worker uses the turns' embedder)."""
    config = settings.embedder
    if config.kind != "local" or not config.worker or config.worker_nice == 0:
        return None
    return BackgroundLocalEmbedder(config.worker_nice, config.worker_threads)


def build_context(
    settings: Settings, database_url: str, *, serving: bool = False
) -> ServiceContext:
    """`serving`: for `ebbtide serve`, whose embedding worker may embed apart."""
    configure_encryption(settings)
    chat_model = build_chat_model(settings)
    return ServiceContext(
        worker_embedder=build_worker_embedder(settings) if serving else None,
        database=Database.connect(database_url, pool_size=settings.db.pool_size),
        counter=default_counter(),
        counters=counter_for_model,
        embedder=build_embedder(settings),
        settings=settings,
        reranker=build_reranker(settings, chat_model),
        chat_model=chat_model,
        query_rewriter=build_query_rewriter(settings, chat_model),
        upstream=HttpUpstream(
            timeout_s=settings.proxy.timeout_s,
            connect_timeout_s=settings.proxy.connect_timeout_s,
            keepalive_s=settings.proxy.keepalive_s,
            connection_retries=settings.proxy.connection_retries,
        ),
    )


def create_app(
    *,
    settings: Settings | None = None,
    context: ServiceContext | None = None,
    database_url: str | None = None,
    serve_docs: bool = True,
    on_ready: Callable[[ServiceContext], None] | None = None,
) -> FastAPI:
    """`context` is given by tests (bound to a rolled-back connection); otherwise the
    lifespan connects to `database_url` (already migrated by `ebbtide serve`). `serve_docs`:
    the interactive docs and the schema, which answer without a key. `on_ready`: called
    with the context once the lifespan has built it (`ebbtide serve` says what it loaded)."""
    settings = settings or (context.settings if context else get_settings())

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = context is None
        if owned:
            url = database_url or settings.database_url
            if url is None:
                raise RuntimeError("no database URL: start the app with `ebbtide serve`")
            app.state.context = build_context(settings, url, serving=True)
        else:
            app.state.context = context
        timers = []
        if owned and settings.retention.days is not None:
            timers.append(asyncio.create_task(purge_periodically(app.state.context)))
        stop_worker = asyncio.Event()
        if owned and settings.embedder.worker:
            timers.append(asyncio.create_task(run_worker(app.state.context, stop_worker)))
        if owned and settings.database_url is None and database_url is not None:
            # `ebbtide serve` started the embedded Postgres for this URL: keep it up
            supervisor = supervise_embedded(settings.data_dir, settings.db.embedded_check_s)
            timers.append(asyncio.create_task(supervisor))
        if owned:
            await app.state.context.database.store_engine()  # read once: the banner says it
        if on_ready is not None:
            on_ready(app.state.context)
        try:
            async with mcp.session_manager.run():
                yield
        finally:
            stop_worker.set()
            for timer in timers:
                timer.cancel()
                with suppress(asyncio.CancelledError):
                    await timer
            if owned:
                await app.state.context.aclose()

    # The docs pages load Swagger UI and ReDoc from assets packaged with fastapi-offline (served
    # under /static-offline-docs), not from a CDN: they work on a machine with no internet.
    make_app = FastAPIOffline if serve_docs else FastAPI
    app = make_app(
        title="Ebbtide",
        version="0.1.0",
        summary="Context management for LLM agents: watermark offload, scratchpad, recall.",
        lifespan=lifespan,
        docs_url="/docs" if serve_docs else None,
        redoc_url="/redoc" if serve_docs else None,
        openapi_url="/openapi.json" if serve_docs else None,
    )
    if context is not None:
        app.state.context = context  # test clients may not run the lifespan
    install_error_handlers(app)
    if serve_docs:
        guard_docs_pages(app)
    app.include_router(router)
    app.include_router(proxy_router)
    document_bodies(app)
    if settings.inspector.enabled:
        install_inspector(app)
    if settings.floor_endpoint:
        app.include_router(floor_router)
    mcp = build_mcp(lambda: app.state.context, bearer_from_headers)
    # Stateless with JSON answers: any replica serves any call. DNS-rebinding protection is on
    # when serving loopback (development mode, no keys); elsewhere every call needs a key.
    mcp_app = mcp.streamable_http_app(
        streamable_http_path=MCP_PATH, stateless_http=True, json_response=True, host=settings.host
    )
    app.router.routes.extend(mcp_app.routes)
    app.add_middleware(
        BodySizeLimit,
        max_bytes=settings.limits.max_body_bytes,
        by_prefix=((PROXY_PREFIX, settings.proxy.max_body_bytes),),
    )
    app.add_middleware(PostOnly)
    app.add_middleware(CountTraffic)
    app.add_middleware(RequestObserver, log_bodies=settings.log.debug_content)  # outermost
    return app
