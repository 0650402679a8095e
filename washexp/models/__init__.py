"""Chat models: one ``Model`` protocol, the ``openai`` backend, and the request recorder."""

from __future__ import annotations

from washexp.models.base import ChatRequest, ChatResponse, Model

__all__ = ["ChatRequest", "ChatResponse", "Model"]
