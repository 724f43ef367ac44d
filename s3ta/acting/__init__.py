"""Acting: pure action selection and the trajectory accumulator."""

from s3ta.acting.actor_core import ActorOutput, agent_input, make_select_action
from s3ta.acting.unroll import STEP_FIELDS, UnrollAccumulator
