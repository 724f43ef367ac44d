"""IMPALA learning: the V-trace loss, RMSProp and the pure learner update."""

from s3ta.learning.learner_core import (GRAD_CLIP_MODES, Hyperparams, LearnerConfig, TrainingState,
                                        clip_gradients, init_training_state, make_sgd_step,
                                        trajectory_loss)
from s3ta.learning.losses import impala_loss
from s3ta.learning.optimizer import RMSPropState, rmsprop_init, rmsprop_update
from s3ta.learning.types import Trajectory
