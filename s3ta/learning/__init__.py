"""IMPALA learning: the V-trace loss, TF1 RMSProp (optax) and the pure learner update."""

from s3ta.learning.learner_core import (GRAD_CLIP_MODES, HYPERPARAM_NAMES, LearnerConfig,
                                        TrainingState, get_hyperparams, init_training_state,
                                        make_optimizer, make_sgd_step, resume_with_config,
                                        set_hyperparams, trajectory_loss)
from s3ta.learning.losses import impala_loss
from s3ta.types import Trajectory
