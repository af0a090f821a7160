"""Adapters behind the ports of `app/core/ports.py`."""
