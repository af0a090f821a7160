"""Use cases: run a turn, read status and chunks. Providers arrive through core.ports."""
