import pytest
import torch

from robustrl_grpo.grpo import Sample, group_advantages, grpo_loss, pack, token_logprobs


def test_advantages_are_relative_to_the_group() -> None:
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 1.0, 0.5, 0.5])
    groups = ["a", "a", "a", "a", "b", "b", "c", "c"]
    adv = group_advantages(rewards, groups)
    for g in "abc":
        members = adv[[i for i, x in enumerate(groups) if x == g]]
        assert abs(float(members.sum())) < 1e-5
    assert adv[0] > 0 > adv[1]
    # A group whose samples all scored the same teaches nothing.
    assert torch.all(adv[4:] == 0)
    # Scaled by the group's spread: one success in four is worth more than one in two.
    assert adv[0] == pytest.approx(3 / 3**0.5, rel=1e-4)


def test_one_reward_per_sample_is_required() -> None:
    with pytest.raises(ValueError, match="one reward per sample"):
        group_advantages(torch.tensor([1.0, 0.0]), ["a"])


def test_token_logprobs_sit_at_the_tokens_own_position() -> None:
    torch.manual_seed(0)
    logits = torch.randn(1, 4, 6)
    ids = torch.tensor([[1, 2, 3, 4]])
    lp = token_logprobs(logits, ids)
    assert lp[0, 0] == 0
    for t in range(1, 4):
        assert lp[0, t] == pytest.approx(float(torch.log_softmax(logits[0, t - 1], -1)[ids[0, t]]))


def test_pack_masks_exactly_the_response_tokens() -> None:
    samples = [Sample([5, 6], [7, 8, 2], [-0.1, -0.2, -0.3], 1.0, "g"), Sample([5], [9], [-0.5], 0.0, "g")]
    batch = pack(samples, pad_id=0, advantages=torch.tensor([1.0, -1.0]))
    assert batch.input_ids.tolist() == [[5, 6, 7, 8, 2], [5, 9, 0, 0, 0]]
    assert batch.loss_mask.tolist() == [[0, 0, 1, 1, 1], [0, 1, 0, 0, 0]]
    assert batch.old_logprobs[0, 2:].tolist() == pytest.approx([-0.1, -0.2, -0.3])
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]
    with pytest.raises(ValueError, match="2 log-probs for 3 response tokens"):
        pack([Sample([5], [7, 8, 2], [-0.1, -0.2], 1.0, "g")], 0, torch.tensor([1.0]))


def test_a_loss_mask_leaves_the_environments_tokens_out() -> None:
    # A tool result (ids 20, 21) between two sampled tokens: no loss on it, its missing log-probs unused.
    sample = Sample([5], [7, 20, 21, 8], [-0.1, None, None, -0.2], 1.0, "g", loss_mask=[1, 0, 0, 1])  # type: ignore[list-item]
    batch = pack([sample], pad_id=0, advantages=torch.tensor([1.0]))
    assert batch.loss_mask.tolist() == [[0, 1, 0, 0, 1]]
    assert batch.old_logprobs.tolist()[0] == pytest.approx([0, -0.1, 0, 0, -0.2])
    with pytest.raises(ValueError, match="a loss mask of 2 for 4 response tokens"):
        pack([Sample([5], [7, 20, 21, 8], [-0.1, 0, 0, -0.2], 1.0, "g", loss_mask=[1, 0])], 0, torch.tensor([1.0]))


def _batch(old: float, advantage: float):
    samples = [Sample([1], [2], [old], 1.0, "g")]
    return pack(samples, 0, torch.tensor([advantage]))


def test_the_gradient_raises_a_good_answers_probability_and_lowers_a_bad_ones() -> None:
    for advantage, direction in ((1.0, -1), (-1.0, 1)):
        new = torch.tensor([[0.0, -1.0]], requires_grad=True)
        loss = grpo_loss(new, _batch(-1.0, advantage), clip_eps=0.2, token_total=1)
        loss.backward()
        # Gradient descent moves the log-prob against the gradient's sign.
        assert torch.sign(new.grad[0, 1]) == direction
        assert new.grad[0, 0] == 0  # the prompt is not trained on


def test_a_ratio_beyond_the_clip_stops_the_gradient_in_the_advantages_direction() -> None:
    # Ratio e^0.5 ≈ 1.65 > 1.2 with a positive advantage: already raised enough, no further push.
    new = torch.tensor([[0.0, -0.5]], requires_grad=True)
    grpo_loss(new, _batch(-1.0, 1.0), clip_eps=0.2, token_total=1).backward()
    assert new.grad[0, 1] == 0
    # The same ratio with a negative advantage is not clipped: the pessimistic bound keeps the gradient.
    new = torch.tensor([[0.0, -0.5]], requires_grad=True)
    grpo_loss(new, _batch(-1.0, -1.0), clip_eps=0.2, token_total=1).backward()
    assert new.grad[0, 1] > 0


def test_the_loss_is_a_mean_over_the_whole_batchs_tokens() -> None:
    new = torch.tensor([[0.0, -1.0]])
    one = grpo_loss(new, _batch(-1.0, 1.0), 0.2, token_total=1)
    four = grpo_loss(new, _batch(-1.0, 1.0), 0.2, token_total=4)
    assert float(one) == pytest.approx(4 * float(four))
