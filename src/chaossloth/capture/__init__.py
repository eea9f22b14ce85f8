"""Access capture: the import hook that instruments the user's modules (``instrument``,
``importer``), the site registry (``sites``), and asyncio's own synchronisation made visible
(``sync``)."""

from __future__ import annotations

from chaossloth.capture.importer import (
    INSTRUMENTED_FILES,
    CaptureFinder,
    install,
    load_file,
    uninstall,
)
from chaossloth.capture.instrument import compile_instrumented, instrument_tree

__all__ = [
    "INSTRUMENTED_FILES",
    "CaptureFinder",
    "compile_instrumented",
    "install",
    "instrument_tree",
    "load_file",
    "uninstall",
]
