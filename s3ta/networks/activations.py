"""Nonlinearities a config can name (`time_activation`, `awrl_hidden_activation`).

A ReLU layer can die under PPO: pushed below zero on every observation it outputs a
constant and passes no gradient back. That happened to the T-maze agent's tokens and to
most of g-AWRL's dense layer (BENCHMARKS.md), hence the choice: 'none' (linear) keeps
its gradient everywhere; 'leaky_relu' keeps a small one; 'tanh' can saturate instead (90 %
of g-AWRL's unit-observation pairs within 1.1 M Pong frames).
"""

import flax.linen as nn

ACTIVATIONS = {'relu': nn.relu, 'leaky_relu': nn.leaky_relu, 'tanh': nn.tanh,
               'none': lambda x: x}
