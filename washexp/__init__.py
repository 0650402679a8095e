"""washexp: evidence-retention benchmarks for AI-agent context and memory compaction."""

from __future__ import annotations

from pathlib import Path

__version__ = "0.1.0"

PACKAGE_DIR = Path(__file__).resolve().parent
PROJECT_ROOT = PACKAGE_DIR.parent
"""Every relative path in a config is resolved from here, never from the working directory."""
