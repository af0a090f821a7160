"""Postgres + pgvector persistence: models, repositories, engine, embedded server."""
