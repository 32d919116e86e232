"""Stable-Baselines3 pieces: the site encoder, callbacks and hyperparameter files."""
