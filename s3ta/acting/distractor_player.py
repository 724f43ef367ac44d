"""003's distractor games played by a trained agent (`config.env.distractor_policy='checkpoint'`).

003 fills its distractor environments with "independent instances of the game played
by a decoupled, pre-trained agent", so that their features move as a real game's do.
`CheckpointDistractors` runs those instances as one `RamFeatureEnv` of
`num_envs x count` games, played by the newest checkpoint of a run trained on the same
game's features alone (no distractors, no random features, the same history), in that
run's own feature order; `RamFeatureEnv` reads their features back in the game's order.
"""

import numpy as np

from s3ta.analysis import rollout
from s3ta.envs import atari_ram


def _trained_env(path: str) -> dict:
  config = rollout.read_metadata(path).get('config')
  return ((config or {}).get('env') or {}) if isinstance(config, dict) else {}


class CheckpointDistractors:
  """`count` distractor games per agent environment, played by a trained feature agent."""

  def __init__(self, checkpoint: str, game: str, num_envs: int, count: int, seed: int, *,
               history: int, greedy: bool = False, **env_kwargs):
    path = rollout.find_checkpoint(checkpoint)
    trained = _trained_env(path)
    wanted = {'name': 'atari_ram', 'game': game, 'random_features': 0, 'distractors': 0,
              'ram_history': history}
    found = {key: trained.get(key, 0 if key in ('random_features', 'distractors') else None)
             for key in wanted}
    if found != wanted:
      raise ValueError(f'distractor_checkpoint {checkpoint!r} cannot play the distractor games: '
                       f'it was trained on {found}; it must have been trained on {wanted}.')
    self.num_envs, self.count = num_envs, count
    self.env = atari_ram.RamFeatureEnv(
        game, num_envs * count, seed, history=history,
        shuffle_seed=int(trained.get('feature_shuffle_seed', 0)),
        full_action_space=bool(trained.get('full_action_space', False)), **env_kwargs)
    try:
      agent = rollout.restore_agent(path, self.env.num_actions, self.env.observation_shape)
      self._runner = rollout.AgentRunner(agent, self.env, seed=seed, greedy=greedy)  # resets
    except Exception:
      self.env.close()
      raise
    self.description = agent.description
    # Position j of the trained agent's observation shows the game's feature perm[j].
    self._order = np.argsort(self.env.feature_order_permutation)

  def step(self) -> None:
    """One agent step of every distractor game (episodes restart on their own)."""
    self._runner.step_batch()

  def features(self) -> np.ndarray:
    """uint8 [num_envs, count, F]: each game's current features in the game's table order."""
    latest = self._runner.env_step.observation[:, :, -1, 0]  # [num_envs * count, F], shuffled
    return latest[:, self._order].reshape(self.num_envs, self.count, -1)

  def close(self) -> None:
    self.env.close()
