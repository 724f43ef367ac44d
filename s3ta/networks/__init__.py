"""Agent networks: the S3TA attention agent, its ablations and the ResNet baselines."""

from s3ta.networks.agent import (ATTENTION_KINDS, NETWORK_KINDS, AgentInput, AgentOutput,
                                 AgentState, Network, NetworkConfig, make_network,
                                 parameter_count, parameter_counts)
from s3ta.networks.attention import (attention_logits, hard_threshold, read_answers,
                                     spatial_attention, spatial_basis, spatial_softmax)
