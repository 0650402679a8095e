"""washexp: evidence-retention benchmarks for AI-agent context and memory compaction."""

from __future__ import annotations

__version__ = "0.1.0"
