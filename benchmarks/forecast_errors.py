"""Do recent forecast errors tell a deployable policy when to leave the tuned rule? Offline.

    pip install scikit-learn                      # not a dependency of the project
    python benchmarks/forecast_errors.py          # PowerTrip-v0, about 4 minutes on two cores
    python benchmarks/forecast_errors.py --quick  # a rough look

The clairvoyant rollout teacher of ``powertrip_env.agents.imitation`` scores every candidate
slot of a state by playing it, then the tuned horizon rule to the end, on the true trace. It
leaves the rule's slot in about 2% of states; docs/agents.md asks whether a policy that sees
only what is deployable could tell those states apart. This script labels train-day states
with the teacher (the teacher's own play) and holds out the states of other episodes, then fits
gradient-boosted trees twice: on the slots' features alone, and on the features plus each
slot's recent forecast error. The error is what a policy can keep for itself: at each decision
it records the forecast it was shown (``decision_view().forecast_power_w``); later it compares
the power now with what the record issued about ``LAGS`` rows ago said for now. It prints
the ROC AUC of telling the states where the rule's slot is not among the best, and the held-out
one-step regret (hours) of playing the slot a regressor predicts to beat the rule by more than a
threshold, against the rule's own.

A measurement, not a test: the trees are scikit-learn's, seeded; CI does not run it.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import numpy as np

import powertrip_env  # noqa: F401  (registers the IDs)
from powertrip_env.agents import imitation

LAGS = (1, 3, 6, 12)  # trace rows (5 minutes each on the shipped data): 5 min to an hour
THRESHOLDS_H = (0.003, 0.01, 0.02, 0.04)


class ForecastMemory:
    """Each episode's record of the forecasts it was shown, by the trace row it was shown in."""

    def __init__(self, n_envs: int) -> None:
        self.shown: list[dict[int, np.ndarray]] = [{} for _ in range(n_envs)]

    def errors(self, vector: Any, masks: np.ndarray) -> np.ndarray:
        """(B, S·len(LAGS) + len(LAGS)): for each slot's sites and for all sites, the log of
        the power now over what the latest record at least ``lag`` rows old said for now (0
        without one); then records this round's forecast."""
        b_count, slots, _ = masks.shape
        out = np.zeros((b_count, slots * len(LAGS) + len(LAGS)), dtype=np.float32)
        for b in range(b_count):
            now = vector.decision_view(b)
            row = int(now.clock_s // now.interval_s)
            shown = self.shown[b]
            if now.rounds == 0:
                shown.clear()  # a new episode
            for k, lag in enumerate(LAGS):
                then = max((r for r in shown if r <= row - lag), default=None)
                if then is None or row - then >= shown[then].shape[0]:
                    continue
                said = shown[then][row - then]
                for s in range(slots):
                    out[b, s * len(LAGS) + k] = _log_ratio(now.power_w, said, masks[b, s])
                out[b, slots * len(LAGS) + k] = _log_ratio(now.power_w, said, None)
            shown[row] = now.forecast_power_w.copy()
        return out


def _log_ratio(power: np.ndarray, said: np.ndarray, mask: np.ndarray | None) -> float:
    """log(power now / what was said for now) over ``mask``'s sites (all with None), in [-3, 3]."""
    have = float(power.sum() if mask is None else power[mask].sum())
    expected = float(said.sum() if mask is None else said[mask].sum())
    if have == expected:
        return 0.0
    if have <= 0.0 or expected <= 0.0:
        return 3.0 if have > expected else -3.0
    return float(np.clip(np.log(have / expected), -3.0, 3.0))


def collect(env_id: str, n_envs: int, steps: int, seed: int) -> tuple[np.ndarray, ...]:
    """``steps`` vector steps of the teacher's own play: features, errors and slot regrets."""
    venv = imitation.make_venv(env_id, {"jitter": False}, n_envs, seed)
    memory = ForecastMemory(n_envs)
    obs = venv.reset()
    feats, errors, regrets = [], [], []
    for _ in range(steps):
        regret = imitation.slot_regrets(venv.vector, venv.masks)
        feats.append(obs.copy())
        errors.append(memory.errors(venv.vector, venv.masks))
        regrets.append(regret)
        obs, _, _, _ = venv.step(imitation.teacher_slots(regret))
    return np.concatenate(feats), np.concatenate(errors), np.concatenate(regrets)


def judge(
    x_train: np.ndarray, r_train: np.ndarray, x_test: np.ndarray, r_test: np.ndarray, seed: int
) -> dict[str, Any]:
    """AUC of spotting the states where the rule's slot (the last) is not among the best, and
    the held-out regret of leaving the rule where a regressor predicts a gain over a threshold."""
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from sklearn.metrics import roc_auc_score

    trees = {"max_iter": 200, "learning_rate": 0.05, "random_state": seed}
    off_rule = r_train[:, -1] > 1e-9
    clf = HistGradientBoostingClassifier(**trees).fit(x_train, off_rule)
    auc = roc_auc_score(r_test[:, -1] > 1e-9, clf.predict_proba(x_test)[:, 1])
    slots = r_train.shape[1]
    gain = np.zeros((x_test.shape[0], slots))  # predicted rule regret − slot regret
    for s in range(slots - 1):
        reg = HistGradientBoostingRegressor(**trees)
        gain[:, s] = reg.fit(x_train, r_train[:, -1] - r_train[:, s]).predict(x_test)
    rows = np.arange(x_test.shape[0])
    played = {}
    for threshold in THRESHOLDS_H:
        choice = np.where(gain.max(axis=1) > threshold, gain.argmax(axis=1), slots - 1)
        played[threshold] = {
            "regret_h": float(r_test[rows, choice].mean()),
            "off_rule": float((choice != slots - 1).mean()),
        }
    return {"auc": float(auc), "played": played}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="PowerTrip-v0")
    parser.add_argument("--n-envs", type=int, default=16)
    parser.add_argument("--steps", type=int, default=800, help="teacher's steps (train)")
    parser.add_argument("--quick", action="store_true", help="150 steps")
    args = parser.parse_args(argv)
    try:
        import sklearn  # noqa: F401
    except ImportError:
        parser.exit(2, "forecast_errors.py needs scikit-learn: pip install scikit-learn\n")
    steps = 150 if args.quick else args.steps
    x_tr, e_tr, r_tr = collect(args.env, args.n_envs, steps, seed=0)
    x_te, e_te, r_te = collect(args.env, args.n_envs, max(steps // 2, 1), seed=1000)
    result: dict[str, Any] = {
        "env": args.env,
        "states": [int(x_tr.shape[0]), int(x_te.shape[0])],
        "off_rule_share": [float((r_tr[:, -1] > 1e-9).mean()), float((r_te[:, -1] > 1e-9).mean())],
        "rule_regret_h": float(r_te[:, -1].mean()),
    }
    inputs = {
        "features": (x_tr, x_te),
        "features + errors": (np.c_[x_tr, e_tr], np.c_[x_te, e_te]),
        "errors": (e_tr, e_te),
    }
    print(
        f"{args.env}: {x_tr.shape[0]:,} labelled states, {x_te.shape[0]:,} held out; the rule's "
        f"slot is not among the best in {result['off_rule_share'][1]:.1%} of the held-out; "
        f"its regret {result['rule_regret_h']:.5f} h a decision"
    )
    print(f"{'inputs':<20} {'AUC':>6}  " + "  ".join(f"> {t:g} h" for t in THRESHOLDS_H))
    for name, (train, test) in inputs.items():
        got = judge(train, r_tr, test, r_te, seed=0)
        result[name] = got
        cells = "  ".join(f"{got['played'][t]['regret_h']:.5f}" for t in THRESHOLDS_H)
        print(f"{name:<20} {got['auc']:6.3f}  {cells}")
    print("(held-out regret, h a decision, of leaving the rule above each predicted gain)")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
