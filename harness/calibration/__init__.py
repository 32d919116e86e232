"""The model held against the world: ``fidelity`` (published runs), ``sensitivity`` (the
calibrated knobs swept), ``calibrate`` and ``validate`` (the surrogate against real federated
training), and ``tune`` (the lookahead rules' parameters, on train days)."""
