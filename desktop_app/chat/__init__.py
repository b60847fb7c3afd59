"""Conversations: chat templates and safe tokenisation (history and KV reuse build on these)."""
