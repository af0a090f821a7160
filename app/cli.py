"""The `ebbtide` command: serve, migrate, distribute, mcp, keys, reembed, worker, eval, bench,
encryption, purge, openapi."""

from __future__ import annotations

import argparse
import gc
import ipaddress
import json
import os
import signal
import sys
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.settings import Settings, get_settings

if TYPE_CHECKING:
    from app.services.context import ServiceContext


def resolve_database_url(settings: Settings) -> str:
    """DATABASE_URL when set, else the embedded Postgres under the data folder."""
    if settings.database_url:
        return settings.database_url
    from app.store.embedded import start_embedded

    return start_embedded(settings.data_dir)


def _migrate(settings: Settings) -> str:
    from app.store.migrate import upgrade_head

    url = resolve_database_url(settings)
    upgrade_head(url)
    return url


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str, keys_exist: bool) -> None:
    """Development mode (no API keys) serves loopback only: nobody else may reach it."""
    if not keys_exist and not is_loopback(host):
        raise SystemExit(
            f"ebbtide: refusing to listen on {host} without API keys; create one with "
            "`ebbtide keys create --tenant NAME`, or serve on 127.0.0.1"
        )


async def _keys_exist(settings: Settings, url: str) -> bool:
    from app.services.auth import keys_exist
    from app.store.database import Database

    database = Database.connect(url, pool_size=1)
    try:
        return await keys_exist(_bare_context(settings, database))
    finally:
        await database.dispose()


def _bare_context(settings: Settings, database: Any) -> Any:
    """A context for commands that touch only the database (no model is loaded)."""
    from app.main import configure_encryption
    from app.providers.embedders import HashEmbedder
    from app.providers.tokenizer import default_counter
    from app.services.context import ServiceContext

    configure_encryption(settings)
    return ServiceContext(
        database=database, counter=default_counter(), embedder=HashEmbedder(), settings=settings
    )


def _with_database(settings: Settings, use: Any) -> Any:
    """Migrates, runs `use(ctx)` on a database-only context, disposes the engine."""
    import asyncio

    from app.store.database import Database

    url = _migrate(settings)

    async def go() -> Any:
        database = Database.connect(url, pool_size=1)
        try:
            return await use(_bare_context(settings, database))
        finally:
            await database.dispose()

    return asyncio.run(go())


def encryption(settings: Settings, args: argparse.Namespace) -> None:
    from app.services.maintenance import reseal_all
    from app.store.sealing import new_key

    if args.action == "new-key":
        print(new_key())
        return
    from app.console import ConsoleProgress

    keys = settings.encryption.key_list()
    with ConsoleProgress() as progress:
        report = _with_database(settings, lambda ctx: reseal_all(ctx, progress=progress))
    rows = ", ".join(f"{table} {count}" for table, count in report.rows_by_table.items())
    state = f"under key 1 of {len(keys)}" if keys else "as plain text (no key configured)"
    print(f"ebbtide: rewrote rows {state}: {rows}")
    print(f"ebbtide: rebuilt the lexical index of {report.chunks_reindexed} chunks")


def purge(settings: Settings, args: argparse.Namespace) -> None:
    from app.services.maintenance import purge_expired

    days = args.older_than_days if args.older_than_days is not None else settings.retention.days
    if days is None:
        raise SystemExit(
            "ebbtide: no retention period; set EBBTIDE_RETENTION__DAYS or pass --older-than-days"
        )
    from app.console import ConsoleProgress

    with ConsoleProgress() as progress:
        purged = _with_database(settings, lambda ctx: purge_expired(ctx, days, progress))
    print(f"ebbtide: purged {purged} sessions idle for more than {days:g} days")


def distribute(settings: Settings, print_only: bool) -> None:
    """Shards the database by session on Citus (docs/SCALING.md): checks that it is Citus,
    migrates it, then distributes the tables not yet distributed."""
    from app.store.distribution import (
        CitusMissing,
        citus_statements,
        distribute_on_citus,
        require_citus,
    )
    from app.store.migrate import upgrade_head

    if print_only:
        print("\n".join(citus_statements()))
        return
    url = resolve_database_url(settings)
    try:
        require_citus(url)  # before migrating: a database that is not Citus is left alone
    except CitusMissing as missing:
        raise SystemExit(f"ebbtide: {missing}; see docs/SCALING.md") from None
    upgrade_head(url)
    ran = distribute_on_citus(url)
    already = len(citus_statements()) - len(ran)
    print(f"ebbtide: distributed {len(ran)} tables ({already} already were)")


def keys(settings: Settings, args: argparse.Namespace) -> None:
    from app.core.scopes import InvalidTenantName, tenant_name
    from app.services.auth import UnknownScope, create_key, revoke_key

    async def go(ctx: Any) -> None:
        if args.action == "create":
            scopes = [s.strip() for s in args.scopes.split(",") if s.strip()]
            key = await create_key(ctx, args.tenant, scopes)
            print(key)
            print(
                f"ebbtide: key for tenant {tenant_name(args.tenant)} with {', '.join(scopes)}; "
                "it is shown only once",
                file=sys.stderr,
            )
        else:
            revoked = await revoke_key(ctx, args.key)
            print(f"ebbtide: revoked {revoked} key(s)")
            if not revoked:
                raise SystemExit(1)

    try:
        _with_database(settings, go)
    except (UnknownScope, InvalidTenantName) as error:
        raise SystemExit(f"ebbtide: {error}") from error


def _exit_on_sigterm(signum: int, frame: object) -> None:
    # uvicorn re-raises the signal after its graceful shutdown; exiting through SystemExit
    # (not the default kill) runs the atexit hook that stops the embedded Postgres.
    raise SystemExit(0)


SYSTEM_ALLOCATOR = "malloc"
# glibc's own default, made fixed: left to itself glibc raises the threshold to the largest
# block freed so far (up to 32 MiB), and a large call's big buffers (its body, its rows) then
# come from the heap, where the next call's leave them scattered: a second 20,000-message call
# kept 21.6 MiB more than the first, and 4.3 to 4.5 with the threshold fixed (docs/RELIABILITY.md).
MMAP_THRESHOLD_BYTES = 128 * 1024


def run_on_the_system_allocator() -> None:
    """Starts this same command again (same process id) with Python's objects on the C
    allocator, unless PYTHONMALLOC says otherwise. Python's own small-object allocator gives
    a 1 MiB block back only when every object in it is gone, so after a whole history posted
    at once a few long-lived objects kept most of the call's memory (+60 % of the server's
    resident size, docs/RELIABILITY.md); glibc's gives back every free page (malloc_trim in
    app/services/throttle.py). Blocks of `MMAP_THRESHOLD_BYTES` or more are mapped on their
    own and unmapped when freed, unless MALLOC_MMAP_THRESHOLD_ says otherwise."""
    if "PYTHONMALLOC" in os.environ:
        return
    environment = {
        "MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD_BYTES),
        **os.environ,
        "PYTHONMALLOC": SYSTEM_ALLOCATOR,
    }
    os.execve(sys.executable, [sys.executable, *sys.orig_argv[1:]], environment)


def serve(settings: Settings) -> None:
    import asyncio

    import uvicorn

    from app.logs import configure_logging
    from app.main import create_app

    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    configure_logging(settings.log)
    url = _migrate(settings)
    keys = asyncio.run(_keys_exist(settings, url))
    check_bind(settings.host, keys)
    docs = settings.docs if settings.docs is not None else not keys
    options: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "log_level": settings.log.level.lower(),
        "log_config": None,  # keep the handlers configure_logging installed
        "access_log": False,  # RequestObserver writes one line per request instead
    }
    if settings.workers > 1:
        # Each worker process builds its app from the environment: the database this
        # process migrated (and runs, when embedded) and what it decided about the docs.
        os.environ.update(DATABASE_URL=url, EBBTIDE_DOCS=str(docs).lower())
        os.environ[KEYS_EXIST] = str(keys).lower()
        uvicorn.run(WORKER_APP, factory=True, workers=settings.workers, **options)
        return
    app = create_app(
        settings=settings,
        database_url=url,
        serve_docs=docs,
        on_ready=lambda ctx: _ready(startup_banner(settings, ctx, keys=keys, docs=docs)),
    )
    uvicorn.run(app, **options)


WORKER_APP = "app.cli:worker_app"
KEYS_EXIST = "EBBTIDE_SERVE_KEYS_EXIST"  # `serve` tells its workers; nobody sets it by hand


def worker_app() -> Any:
    """One `serve --workers` process's app (uvicorn calls this in each worker process)."""
    from app.logs import configure_logging
    from app.main import create_app

    settings = get_settings()
    configure_logging(settings.log)
    keys = os.environ.get(KEYS_EXIST) == "true"
    docs = bool(settings.docs)
    return create_app(
        settings=settings,
        database_url=settings.database_url,
        serve_docs=docs,
        on_ready=lambda ctx: _ready(
            f"ebbtide: worker {os.getpid()} ready\n"
            + startup_banner(settings, ctx, keys=keys, docs=docs)
        ),
    )


def _ready(banner: str) -> None:
    # What is alive once the server is up (modules, tokenizers, models) lives as long as it:
    # the garbage collector stops walking it, so a full collection during a large call
    # (app/services/throttle.py) walks that call's objects only and holds the loop shorter.
    gc.freeze()
    print(banner, flush=True)


def startup_banner(settings: Settings, ctx: ServiceContext, *, keys: bool, docs: bool) -> str:
    """What `ebbtide serve` says once it is up: where its data lives, whether keys are on,
    which embedder it loaded, and where the inspector and the API docs are."""
    from sqlalchemy.engine import make_url

    if settings.database_url:
        where = make_url(settings.database_url).render_as_string(hide_password=True)
        data = f"Postgres at {where} (DATABASE_URL)"
    else:
        data = f"embedded Postgres in {settings.data_dir.resolve() / 'pg'}"
    if keys:
        access = "API keys on: every call needs one; the inspector asks for one at /ui/login"
    else:
        access = (
            "API keys off (development mode, loopback only); "
            "`ebbtide keys create --tenant NAME` turns them on"
        )
    embedder = f"embedder {ctx.embedder.model_name} ({settings.embedder.kind}); " + (
        "offloads embed before they answer"
        if settings.embedder.offload_embedding == "inline"
        else "offloads queue their embedding for "
        + ("a worker in this process" if settings.embedder.worker else "`ebbtide worker`")
    )
    base = f"http://{settings.host}:{settings.port}"
    pages = [f"inspector {base}/ui/" if settings.inspector.enabled else "inspector off"]
    pages.append(f"API docs {base}/docs" if docs else "API docs off (EBBTIDE_DOCS=true)")
    proxy = (
        f"proxy: /v1/chat/completions to {settings.proxy.openai_base_url}, "
        f"/v1/messages to {settings.proxy.anthropic_base_url}"
    )
    lines = [f"data: {data}", access, embedder, proxy, ", ".join(pages), f"serving on {base}"]
    engine = ctx.database.detected_engine
    if engine is not None:  # as /readyz reports it
        lines.insert(1, json.dumps({"engine": asdict(engine)}))
    return "\n".join(f"ebbtide: {line}" for line in lines)


def engine(settings: Settings, args: argparse.Namespace) -> None:
    """Upgrades the embedded data folder to the bundled Postgres (app/store/engine_upgrade.py)."""
    from app.store.engine_upgrade import upgrade_embedded

    if settings.database_url:
        sys.exit("ebbtide: DATABASE_URL is set: upgrade that server with its own tools")
    done = upgrade_embedded(
        settings.data_dir, args.old_bindir, say=lambda line: print(f"ebbtide: {line}")
    )
    print(
        f"ebbtide: {done.pgdata} now holds PostgreSQL {done.to_major} data; the PostgreSQL "
        f"{done.from_major} folder is kept as {done.kept}: delete it once the service runs well"
    )


def mcp_stdio(settings: Settings) -> None:
    """The memory tool over MCP on stdin/stdout; the caller's key from EBBTIDE_API_KEY
    (none: development mode, when the database has no keys). Nothing else may go to stdout."""
    import asyncio

    from app.api.mcp import build_mcp
    from app.main import build_context

    url = _migrate(settings)
    key = os.environ.get("EBBTIDE_API_KEY") or None

    async def go() -> None:
        ctx = build_context(settings, url)
        try:
            await build_mcp(lambda: ctx, lambda _: key).run_stdio_async()
        finally:
            await ctx.aclose()

    asyncio.run(go())


def reembed(settings: Settings, key: str | None, now: bool) -> None:
    import asyncio

    from app.console import ConsoleProgress
    from app.main import build_context
    from app.services.reembed import reembed as run_reembed

    url = _migrate(settings)

    async def go() -> None:
        ctx = build_context(settings, url)
        try:
            with ConsoleProgress() as progress:
                report = await run_reembed(ctx, key, now=now, progress=progress)
        finally:
            await ctx.aclose()
        model = ctx.embedder.model_name
        print(f"ebbtide: {report.queued} chunks in the embedding queue for {model}")
        if now:
            print(f"ebbtide: embedded {report.embedded} chunks")
        else:
            print("ebbtide: the worker of `ebbtide serve` or `ebbtide worker` embeds them")
        if report.stopped_by:
            raise SystemExit(f"ebbtide: stopped early, {report.stopped_by}")

    asyncio.run(go())


def worker(settings: Settings, metrics_port: int | None) -> None:
    """Runs an embedding worker until SIGINT or SIGTERM (it finishes its batch first)."""
    import asyncio
    import signal

    from app.main import build_context
    from app.services.embedding_queue import run_worker

    url = _migrate(settings)
    if metrics_port is not None:
        from prometheus_client import start_http_server

        start_http_server(metrics_port, addr=settings.host)

    async def go() -> None:
        ctx = build_context(settings, url)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        print(f"ebbtide: embedding worker running with {ctx.embedder.model_name}", flush=True)
        try:
            await run_worker(ctx, stop)
        finally:
            await ctx.aclose()
        print("ebbtide: embedding worker stopped", flush=True)

    asyncio.run(go())


def evaluate(settings: Settings, args: argparse.Namespace) -> None:
    import asyncio

    from app.evaluation.run import EvalConfig, run_eval

    config = EvalConfig.quick() if args.quick else EvalConfig()
    if args.seed is not None:
        config = EvalConfig(config.window, config.pressures, config.task_turns, args.seed)
    if args.without_times:
        config = replace(config, hard=replace(config.hard, timed=False))
    url = None if args.url else _migrate(settings)
    command = "ebbtide eval " + " ".join(sys.argv[2:])
    asyncio.run(run_eval(settings, config, args.out, url, args.url, args.api_key, command))


def bench(settings: Settings, args: argparse.Namespace) -> None:
    from app.bench.run import BenchConfig, run_bench
    from app.console import ConsoleProgress

    config = BenchConfig.quick() if args.quick else BenchConfig()
    command = "ebbtide bench " + " ".join(sys.argv[2:])
    with ConsoleProgress() as progress:
        results = run_bench(config, args.out, settings.data_dir, command, progress)
    for target in results["targets"]:
        verdict = "met" if target["met"] else "NOT met"
        print(f"ebbtide: {target['target']}: {target['value']} ({verdict})")
    print(f"ebbtide: {args.out}/bench.json and bench.md written in {results['seconds']} s")


def write_openapi(path: Path) -> None:
    from app.main import create_app

    schema = create_app(settings=Settings(database_url="postgresql://unused")).openapi()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="ebbtide", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    serving = commands.add_parser("serve", help="migrate, then serve HTTP on HOST:PORT")
    serving.add_argument("--host", default=None, help="default: HOST or EBBTIDE_HOST, 127.0.0.1")
    serving.add_argument(
        "--port", type=int, default=None, help="default: PORT or EBBTIDE_PORT, 8000"
    )
    serving.add_argument(
        "--workers",
        type=_at_least_one,
        default=None,
        help="server processes on the port (default: EBBTIDE_WORKERS or WEB_CONCURRENCY, 1)",
    )
    serving.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="where the embedded Postgres lives (default: EBBTIDE_DATA_DIR, .ebbtide)",
    )
    commands.add_parser("migrate", help="alembic upgrade head")
    commands.add_parser("mcp", help="serve the memory tool over MCP on stdio")
    distributing = commands.add_parser(
        "distribute", help="migrate, then shard the tables by session on Citus"
    )
    distributing.add_argument(
        "--print", action="store_true", dest="print_only", help="print the SQL, run nothing"
    )
    again = commands.add_parser(
        "reembed", help="embed chunks stored without a vector or with another model's"
    )
    again.add_argument("--session", default=None, help="only this session (default: all)")
    again.add_argument("--tenant", default="local", help="the session's tenant (default: local)")
    again.add_argument(
        "--now", action="store_true", help="embed them in this process instead of queueing"
    )
    working = commands.add_parser(
        "worker", help="embed what offloads queued (any number may run beside `serve`)"
    )
    working.add_argument(
        "--metrics-port", type=int, default=None, help="serve /metrics on HOST:PORT"
    )
    key_commands = commands.add_parser("keys", help="create or revoke API keys")
    key_actions = key_commands.add_subparsers(dest="action", required=True)
    create = key_actions.add_parser("create", help="print a new key (shown once)")
    create.add_argument("--tenant", required=True)
    create.add_argument(
        "--scopes",
        default="memory:read,memory:write",
        help="comma-separated: memory:read, memory:write, memory:offload, memory:forget, admin",
    )
    revoke = key_actions.add_parser("revoke", help="revoke a key, by the key or its prefix")
    revoke.add_argument("key")
    evaluation = commands.add_parser("eval", help="run the evaluation against baselines")
    evaluation.add_argument("--out", type=Path, default=Path("out/eval"))
    evaluation.add_argument("--quick", action="store_true", help="small window, under 2 min")
    evaluation.add_argument("--url", default=None, help="a running server instead of in-process")
    evaluation.add_argument("--api-key", default=None)
    evaluation.add_argument("--seed", type=int, default=None)
    evaluation.add_argument(
        "--without-times",
        action="store_true",
        help="the hard set posted without message times, as imported history is",
    )
    sealing = commands.add_parser("encryption", help="encryption at rest of conversation text")
    sealing_actions = sealing.add_subparsers(dest="action", required=True)
    sealing_actions.add_parser("new-key", help="print a new Fernet key")
    sealing_actions.add_parser(
        "rotate",
        help="re-encrypt every row with the first key of EBBTIDE_ENCRYPTION__KEYS "
        "(also encrypts rows written before encryption was on)",
    )
    purging = commands.add_parser("purge", help="delete sessions idle past the retention period")
    purging.add_argument(
        "--older-than-days", type=float, default=None, help="default: EBBTIDE_RETENTION__DAYS"
    )
    benchmark = commands.add_parser(
        "bench", help="per-turn cost, history and archive growth, throughput, against the floor"
    )
    benchmark.add_argument("--out", type=Path, default=Path("out/bench"))
    benchmark.add_argument("--quick", action="store_true", help="small sizes, about 2 min")
    engines = commands.add_parser("engine", help="the embedded Postgres's data folder")
    engine_actions = engines.add_subparsers(dest="action", required=True)
    upgrading = engine_actions.add_parser(
        "upgrade", help="move data written by an older embedded Postgres to the bundled one"
    )
    upgrading.add_argument(
        "--old-bindir",
        type=Path,
        default=None,
        help="the old version's binaries (default: fetched with pip into a scratch folder)",
    )
    openapi = commands.add_parser("openapi", help="write the OpenAPI schema")
    openapi.add_argument("--out", type=Path, default=Path("openapi/openapi.json"))
    args = parser.parse_args(argv)
    if args.command == "serve" and argv is None:  # the process's own command line
        run_on_the_system_allocator()
    from app.store.embedded import EmbeddedDataOutdated
    from app.store.engine_upgrade import (
        EmbeddedServerRunning,
        EngineUpgradeFailed,
        NothingToUpgrade,
    )

    try:
        _run_command(args, get_settings())
    except (
        EmbeddedDataOutdated,
        NothingToUpgrade,
        EmbeddedServerRunning,
        EngineUpgradeFailed,
    ) as e:
        sys.exit(f"ebbtide: {e}")


def _at_least_one(text: str) -> int:
    number = int(text)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {number}")
    return number


def serve_settings(settings: Settings, args: argparse.Namespace) -> Settings:
    """The settings with `serve`'s options over the environment's."""
    given = {
        "host": args.host,
        "port": args.port,
        "data_dir": args.data_dir,
        "workers": args.workers,
    }
    return settings.model_copy(update={k: v for k, v in given.items() if v is not None})


def _run_command(args: argparse.Namespace, settings: Settings) -> None:
    if args.command == "serve":
        serve(serve_settings(settings, args))
    elif args.command == "mcp":
        mcp_stdio(settings)
    elif args.command == "migrate":
        print(f"ebbtide: migrated {_migrate(settings).split('@')[-1]}")
    elif args.command == "distribute":
        distribute(settings, args.print_only)
    elif args.command == "reembed":
        from app.core.types import session_key

        reembed(
            settings, session_key(args.tenant, args.session) if args.session else None, args.now
        )
    elif args.command == "worker":
        worker(settings, args.metrics_port)
    elif args.command == "keys":
        keys(settings, args)
    elif args.command == "eval":
        evaluate(settings, args)
    elif args.command == "encryption":
        encryption(settings, args)
    elif args.command == "purge":
        purge(settings, args)
    elif args.command == "bench":
        bench(settings, args)
    elif args.command == "engine":
        engine(settings, args)
    elif args.command == "openapi":
        write_openapi(args.out)


if __name__ == "__main__":
    main()
