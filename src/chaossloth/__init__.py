"""ChaosSloth: deterministic concurrency verification for Python asyncio."""

from __future__ import annotations

__version__ = "0.1.0"
