from robustrl_grpo.task import Problem, all_problems, eval_problems, problems_for_step, reward

import pytest


def test_a_steps_prompts_are_a_pure_function_of_seed_and_step() -> None:
    assert problems_for_step(3, 7, 16, 9) == problems_for_step(3, 7, 16, 9)
    assert problems_for_step(3, 7, 16, 9) != problems_for_step(3, 8, 16, 9)
    assert problems_for_step(3, 7, 16, 9) != problems_for_step(4, 7, 16, 9)


def test_prompts_within_a_step_are_distinct_and_in_range() -> None:
    problems = problems_for_step(0, 1, 100, 9)
    assert len(set(problems)) == 100
    assert set(problems) == set(all_problems(9))
    with pytest.raises(ValueError, match="101 prompts"):
        problems_for_step(0, 1, 101, 9)
    with pytest.raises(ValueError, match="step must be >= 1"):
        problems_for_step(0, 0, 4, 9)


def test_the_reward_is_exactly_the_sum_and_a_stop() -> None:
    problem = Problem(7, 8)
    assert problem.prompt == "7+8=" and problem.answer == "15"
    assert reward(problem, "15", finished_with_eos=True) == 1.0
    assert reward(problem, "15", finished_with_eos=False) == 0.0  # ran on past the answer's end
    assert reward(problem, "16", finished_with_eos=True) == 0.0
    assert reward(problem, "150", finished_with_eos=True) == 0.0


def test_the_eval_set_is_fixed() -> None:
    assert eval_problems(9, 20) == eval_problems(9, 20)
    assert len(eval_problems(9, 500)) == 100
