"""The one map of rattler's exceptions (envlock/seams/conda/errors.py) covers every class py-rattler defines."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import rattler.exceptions

from envlock.seams.conda.errors import KINDS, _NOT_ERRORS, mapped, translate
from envlock.errors import ChannelError, EnvCreateError, EnvlockError, SolveError, SpecError

CLASSES = sorted(
    (name for name, obj in vars(rattler.exceptions).items()
     if inspect.isclass(obj) and issubclass(obj, Exception) and name not in _NOT_ERRORS),
)
WANT = {"channel": ChannelError, "spec": SpecError, "package": EnvCreateError, "install": EnvCreateError,
        "solve": SolveError}


def test_every_rattler_exception_has_a_family() -> None:
    assert CLASSES and set(CLASSES) == set(KINDS), set(CLASSES) ^ set(KINDS)


@pytest.mark.parametrize("name", CLASSES)
def test_each_leaves_the_seam_as_one_envlock_error_without_credentials(name: str) -> None:
    exc = getattr(rattler.exceptions, name)("failed for https://user:s3cret@host/t/tok/conda-forge\nsecond line")
    err = translate(exc)
    assert isinstance(err, WANT[KINDS[name]]) and err.hint
    assert "s3cret" not in err.message and "tok" not in err.message and "\n" not in err.message


def test_a_real_rattler_failure_is_mapped(tmp_path: Path) -> None:
    from rattler import MatchSpec

    with pytest.raises(SpecError, match="invalid match spec"), mapped():
        MatchSpec("foo >=<1")
    with pytest.raises(EnvCreateError, match="cannot unpack broken.conda"), mapped(what="broken.conda", default="package"):
        from rattler.package_streaming import extract

        (tmp_path / "broken.conda").write_bytes(b"not a zip")
        extract(tmp_path / "broken.conda", tmp_path / "out")


def test_other_exceptions_pass_through_unless_a_default_family_is_named() -> None:
    assert translate(ValueError("x")) is None
    assert isinstance(translate(ValueError("x"), default="install", what="into /p"), EnvlockError)
    with pytest.raises(KeyError), mapped():
        raise KeyError("not rattler's")
