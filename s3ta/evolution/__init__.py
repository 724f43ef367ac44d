"""Paper 004: the AttentionAgent trained by CMA-ES (controller, rollout workers, checkpoints)."""
