"""Interpretability tools for S3TA agents (paper 000, §4 and Appendix A.5-A.7).

numerics.py: pure functions (what/where, saliency scores, marginals, entropy, blending);
render.py: images, GIFs and plots; rollout.py: loading and playing an agent;
cli.py: `python -m s3ta.analysis <subcommand>`.
"""
