"""pyproject.toml's accelerator extras pull jax's matching plugin extra, at the jax releases
the package itself admits."""
import pathlib
import pytest

tomllib = pytest.importorskip("tomllib", reason="tomllib is in Python 3.11 and newer")

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_accelerator_extras_follow_the_jax_pin():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    jax_pin = next(d for d in project["dependencies"] if d.startswith("jax>") or d.startswith("jax="))
    extras = project["optional-dependencies"]
    for extra, jax_extra in (("cuda", "cuda12"), ("tpu", "tpu")):
        (requirement,) = extras[extra]
        assert requirement == jax_pin.replace("jax", f"jax[{jax_extra}]", 1)
