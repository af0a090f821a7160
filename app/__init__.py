"""Ebbtide: context management for LLM agents."""
