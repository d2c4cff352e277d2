import argparse

import pytest

from robustrl_grpo.config import JobConfig


def test_flags_override_variables_which_override_defaults() -> None:
    parser = argparse.ArgumentParser()
    JobConfig.add_arguments(parser)
    cfg = JobConfig.resolve(parser.parse_args(["--steps", "7"]), {"ROBUSTRL_GRPO_STEPS": "9", "ROBUSTRL_GRPO_LR": "0.001"})
    assert cfg.steps == 7 and cfg.lr == 0.001 and cfg.group_size == JobConfig().group_size


def test_the_environment_round_trips() -> None:
    cfg = JobConfig(steps=3, state_dir="/tmp/x", temperature=0.7)
    assert JobConfig.resolve(None, cfg.to_env()) == cfg


def test_bad_values_name_the_setting() -> None:
    with pytest.raises(ValueError, match="ROBUSTRL_GRPO_STEPS='many'"):
        JobConfig.resolve(None, {"ROBUSTRL_GRPO_STEPS": "many"})
    with pytest.raises(ValueError, match="group_size must be >= 2"):
        JobConfig(group_size=1)
    with pytest.raises(ValueError, match="clip_eps"):
        JobConfig(clip_eps=1.5)


def test_where_batches_come_from_and_versions_go_is_checked() -> None:
    with pytest.raises(ValueError, match="batches must be 'engine' or 'robustrl'"):
        JobConfig(batches="disk")
    with pytest.raises(ValueError, match="publish must be 'engine' or 'agent'"):
        JobConfig(publish="email")
