"""The eight stages of a ChaosSloth run, one module each, in order (ARCHITECTURE.md: stage table).

Every stage follows :class:`~chaossloth.stages.context.Stage` (``name``, ``title``,
``skip_reason(ctx)``, ``run(ctx)``) over one shared :class:`~chaossloth.stages.context.Context`;
:func:`chaossloth.pipeline.run` is the loop over :data:`STAGES`.  ARCHITECTURE.md has the table
stage -> module -> engine file, with what each stage reads and writes on the context.
"""

from __future__ import annotations

from chaossloth.stages.adversarial_replay import AdversarialReplay
from chaossloth.stages.alphabet import Alphabet
from chaossloth.stages.capture import Capture
from chaossloth.stages.collapse import Collapse
from chaossloth.stages.collision_window import CollisionWindow
from chaossloth.stages.context import Context, Result, Stage
from chaossloth.stages.diagnose import Diagnose
from chaossloth.stages.synthesize import Synthesize
from chaossloth.stages.verdict import Verdict

STAGES: tuple[Stage, ...] = (
    Capture(),
    Alphabet(),
    Collapse(),
    CollisionWindow(),
    Diagnose(),
    Synthesize(),
    AdversarialReplay(),
    Verdict(),
)

__all__ = ["STAGES", "Context", "Result", "Stage"]
