import chaossloth
from chaossloth import _core


def test_engine_errors_are_exceptions() -> None:
    assert issubclass(_core.DivergedError, _core.EngineError)
    assert chaossloth.__version__


def test_the_suite_tests_the_installed_package() -> None:
    """make test runs the suites against a regular install (site-packages), never the tree: an
    editable install once hid that ChaosSloth walked its own capture wrappers as library code
    when installed as the README says (issue 35)."""
    import os
    from pathlib import Path

    import pytest

    if not os.environ.get("CHAOSSLOTH_EXPECT_INSTALLED"):
        pytest.skip("CHAOSSLOTH_EXPECT_INSTALLED is not set (make test sets it)")
    here = Path(chaossloth.__file__).resolve()
    assert "site-packages" in here.parts, here
    assert "site-packages" in Path(_core.__file__).resolve().parts, _core.__file__
    tree = Path(__file__).resolve().parents[1] / "src"
    assert tree not in here.parents, here
