"""Shared fixtures: the base model (made once per session, about 10 s) and a running engine."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The base model: deploy/local/vllm.sh's, or one made here when the tests run elsewhere."""
    given = os.environ.get("ROBUSTRL_GRPO_TEST_MODEL")
    if given and (Path(given) / "model.safetensors").exists():
        return Path(given)
    from robustrl_grpo.model import make_base_model

    return make_base_model(tmp_path_factory.mktemp("model") / "base", log=lambda _: None)


def _vllm_available() -> bool:
    try:
        import vllm  # noqa: F401
    except ImportError:
        return False
    return True


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    """Tests marked ``engine`` need vLLM: skipped where it is not installed, except where
    ROBUSTRL_REQUIRE_VLLM=1 (the integration tier), where they run and fail if it is missing."""
    if _vllm_available() or os.environ.get("ROBUSTRL_REQUIRE_VLLM") == "1":
        return
    skip = pytest.mark.skip(reason="vLLM is not installed (deploy/local/vllm.sh ensure)")
    for item in items:
        if "engine" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="module")
def engine(model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator["object"]:
    from robustrl_grpo.local import EngineProcess

    process = EngineProcess(str(model_dir), tmp_path_factory.mktemp("engine") / "engine.log")
    try:
        process.wait(timeout=300)
        yield process
    finally:
        process.stop()
