"""A real GRPO job under robustrl: PyTorch training on torchrun, vLLM rollouts (examples/grpo/README.md)."""
