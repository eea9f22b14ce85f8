import chaossloth
from chaossloth import _core


def test_engine_errors_are_exceptions() -> None:
    assert issubclass(_core.DivergedError, _core.EngineError)
    assert chaossloth.__version__
