"""The candidate-set agent taught by a clairvoyant teacher: behaviour cloning, then DAgger.

PPO over the candidate slots learns to pick the best fixed rule among them and stops there
(docs/agents.md): its reward says only, hundreds of rounds later, whether the episode was
fast, and one slot played every round is a strong local optimum. A teacher can say which slot
is best *in this state*. ``TEACHER`` scores every slot by a rollout: the slot played now, then
the tuned horizon rule (``powertrip_env.baselines.lookahead.HorizonRule``) every round after, to the
end of the episode, on the true trace with the episode's own jitter (``Clairvoyant.follow``). The
slot whose rollout reaches the target first is one step of policy improvement over the rule, and on
PowerTrip-v0 it takes about half the way from the rule to the clairvoyant optimiser. On the
measured track each episode is rolled out in its own drawn world. A second teacher,
``--teacher informed`` (``informed_regrets``), labels the slot nearest to what ``Informed``
plays: the rule told the episode's drawn unknowns but not the future, so a student of it learns
identification alone.

The teacher reads future actuals, so it only labels training states; the student is the same
network PPO trains (an SB3 ``MlpPolicy`` over the slots' deployable features) and sees only
those. Behaviour cloning learns from the teacher's own episodes; DAgger (Ross et al., 2011)
then plays the student, or the teacher with probability ``beta``, and labels the states the
student reaches, so that it learns to recover from its own mistakes. The loss is the expected
regret of the student's choice (each slot's rollout time over the best slot's, in hours) plus
a cross-entropy towards the best slots: states where the choice costs nothing weigh nothing.

All of it runs on the native vector env: one compiled call steps every episode, builds every
candidate and plays every rollout round of the batch.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from powertrip_env.agents import checks
from powertrip_env.agents.candidate_vec_env import CandidateVecEnv
from powertrip_env.agents.candidates import N_SLOTS
from powertrip_env.agents.saving import clear_folder, save_model, write_text
from powertrip_env.baselines.lookahead import TUNED
from powertrip_env.harness.arguments import add_env, add_force, add_out, add_seed

# The rule the teacher's rollouts play after the slot they score: the tuned horizon rule.
TEACHER = (TUNED["HorizonRule"]["horizon"], TUNED["HorizonRule"]["margin"])
# Why --env takes only IDs of one site catalogue (powertrip_env.harness.arguments' rule).
NATIVE_VECTOR = "the teacher labels one catalogue on the native vector env"


@dataclass
class Dataset:
    """Labelled states: each state's slot features and each slot's regret (hours)."""

    features: np.ndarray  # (T, N_FEATURES) float32
    regret: np.ndarray  # (T, N_SLOTS) float64: rollout TTA over the best slot's, ≥ 0

    def __add__(self, other: Dataset) -> Dataset:
        return Dataset(
            np.concatenate([self.features, other.features]),
            np.concatenate([self.regret, other.regret]),
        )

    def __len__(self) -> int:
        return int(self.features.shape[0])


def slot_regrets(vector: Any, masks: np.ndarray, rule: tuple[float, float] = TEACHER) -> np.ndarray:
    """CLAIRVOYANT: (B, S) each slot's regret in every sub-environment of ``vector`` (a
    ``PowerTripVectorEnv``): its rollout's time to the target (the slot, then ``rule`` to the
    end, on the true trace) minus the best slot's. ``masks`` (B, S, N) are the slots. Slots that
    hold the same set are rolled out once. On the measured track each episode's world is its
    own (its drawn unknowns folded in), so each is rolled out in its own world."""
    if not vector.decision_view(0).measured_track:
        tta = _rollouts(vector.clairvoyant(), masks, np.arange(masks.shape[0]), rule)
    else:
        one = np.zeros(1, dtype=np.int64)
        tta = np.concatenate(
            [
                _rollouts(vector.clairvoyant(i), masks[i : i + 1], one, rule)
                for i in range(masks.shape[0])
            ]
        )
    return tta - tta.min(axis=1, keepdims=True)


def _rollouts(
    future: Any, masks: np.ndarray, rows: np.ndarray, rule: tuple[float, float]
) -> np.ndarray:
    """(len(rows), S) the time to the target of each slot's rollout, slot k of ``masks[j]``
    from row ``rows[j]`` of ``future``'s state."""
    b, s, _ = masks.shape
    starts, firsts, where = [], [], np.empty((b, s), dtype=np.int64)
    for j in range(b):
        unique, inverse = np.unique(masks[j], axis=0, return_inverse=True)
        where[j] = len(firsts) + inverse.ravel()
        firsts.extend(unique)
        starts.extend([rows[j]] * unique.shape[0])
    state = future.state.take(np.asarray(starts, dtype=np.intp))
    return future.follow(np.asarray(firsts, dtype=bool), rule, state=state).tta_h[where]


def informed_regrets(
    vector: Any, masks: np.ndarray, rule: tuple[float, float] = TEACHER
) -> np.ndarray:
    """READS THE DRAW: (B, S) how far each slot's set is from what ``Informed`` would play,
    ``rule`` with its what-ifs told the episode's drawn unknowns and, on the moving track, each
    site's present state (a perfect monitor; never the future): the share of sites on which
    they differ, less the nearest slot's. The teacher of identification alone: on the measured
    track a student of it learns to act as if it knew the draw, on the moving track as if it
    saw every change when it happens, from slots built on the telemetry's estimates; on the
    known track the draw is the stated world and it is the rule itself."""
    told = None  # the known track: the stated values are the world
    if vector.decision_view(0).measured_track:
        doors = (vector.clairvoyant(i) for i in range(masks.shape[0]))
        told = np.stack([door.monitored().vector for door in doors])
    choice = vector.candidates([rule], belief=told).masks[:, 1]
    apart = (masks != choice[:, None, :]).mean(axis=2)
    return apart - apart.min(axis=1, keepdims=True)  # its set may be no slot's: the nearest


TEACHERS = {"rollout": slot_regrets, "informed": informed_regrets}
"""``--teacher``: how a state's slots are scored. ``rollout`` (the default) rolls each slot out
on the true future; ``informed`` asks what ``Informed`` would play (``informed_regrets``)."""


def teacher_targets(regret: np.ndarray) -> np.ndarray:
    """(T, S) the teacher's choice as a distribution: the tuned rule's slot (the last) where it
    is among the best, else the best slots, uniform over ties."""
    best = regret <= 1e-9
    rule = best[:, -1]
    target = np.where(rule[:, None], np.eye(regret.shape[1])[-1], best).astype(np.float64)
    return target / target.sum(axis=1, keepdims=True)


def teacher_slots(regret: np.ndarray) -> np.ndarray:
    """(T,) the slot the teacher plays: the tuned rule's where it is among the best, else the
    first best."""
    rule = regret[:, -1] <= 1e-9
    return np.where(rule, regret.shape[1] - 1, np.argmin(regret, axis=1))


def collect(
    venv: CandidateVecEnv,
    steps: int,
    student: Any = None,
    beta: float = 1.0,
    rng: np.random.Generator | None = None,
    obs: np.ndarray | None = None,
    teacher: str = "rollout",
) -> tuple[Dataset, np.ndarray]:
    """``steps`` vector steps of ``venv`` labelled by ``teacher`` (``TEACHERS``): each env
    plays the teacher's best slot with probability ``beta``, else ``student``'s (a callable from
    features (B, F) to slots (B,)). Returns the data and the last observation (to go on)."""
    rng = rng or np.random.default_rng(0)
    score = TEACHERS[teacher]
    obs = venv.reset() if obs is None else obs
    feats, regrets = [], []
    for _ in range(steps):
        regret = score(venv.vector, venv.masks)
        feats.append(obs.copy())
        regrets.append(regret)
        taught = teacher_slots(regret)
        if student is None or beta >= 1.0:
            actions = taught
        else:
            actions = np.where(rng.random(venv.num_envs) < beta, taught, student(obs))
        obs, _, _, _ = venv.step(actions)
    return Dataset(np.concatenate(feats), np.concatenate(regrets)), obs


def fit(
    policy: Any,
    data: Dataset,
    epochs: int = 20,
    batch_size: int = 256,
    learning_rate: float = 1e-3,
    ce_weight: float = 0.1,
    seed: int = 0,
) -> list[float]:
    """Train the actor of an SB3 ``ActorCriticPolicy`` ``policy`` on ``data``: the expected
    regret of its slot distribution plus ``ce_weight`` × the cross-entropy towards the best
    slots (uniform over ties). Returns the mean loss of each epoch."""
    torch.manual_seed(seed)
    x = torch.as_tensor(data.features, dtype=torch.float32)
    regret = torch.as_tensor(data.regret, dtype=torch.float32)
    # The target is the teacher's choice: the tuned rule's slot when it is among the best (so
    # the student's default is the rule), else the best slots, uniform over ties.
    target = torch.as_tensor(teacher_targets(data.regret), dtype=torch.float32)
    matters = regret.max(dim=1).values > 1e-9
    scale = float(regret[matters].max(dim=1).values.mean()) if bool(matters.any()) else 1.0
    params = [
        *policy.mlp_extractor.policy_net.parameters(),
        *policy.action_net.parameters(),
    ]
    optimiser = torch.optim.Adam(params, lr=learning_rate)
    generator = torch.Generator().manual_seed(seed)
    losses = []
    policy.set_training_mode(True)
    for _ in range(epochs):
        order = torch.randperm(x.shape[0], generator=generator)
        total = 0.0
        for start in range(0, x.shape[0], batch_size):
            idx = order[start : start + batch_size]
            logp = torch.log_softmax(_logits(policy, x[idx]), dim=1)
            expected = (logp.exp() * regret[idx]).sum(dim=1).mean() / scale
            ce = -(target[idx] * logp).sum(dim=1).mean()
            loss = expected + ce_weight * ce
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            total += float(loss.detach()) * idx.shape[0]
        losses.append(total / x.shape[0])
    policy.set_training_mode(False)
    return losses


def _logits(policy: Any, x: torch.Tensor) -> torch.Tensor:
    """The actor's logits over the slots (the flat features through its policy MLP)."""
    features = policy.extract_features(x, policy.pi_features_extractor)
    return policy.action_net(policy.mlp_extractor.forward_actor(features))


def student_of(policy: Any) -> Any:
    """The student's greedy slots for a batch of features, as ``collect`` asks."""

    def act(obs: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            logits = _logits(policy, torch.as_tensor(obs, dtype=torch.float32))
        return logits.argmax(dim=1).numpy()

    return act


def make_venv(env_id: str, env_kwargs: dict[str, Any], n_envs: int, seed: int) -> CandidateVecEnv:
    """The candidate vector env the teacher labels, seeded like SB3 seeds its envs."""
    venv = CandidateVecEnv(gym.make_vec(env_id, num_envs=n_envs, **env_kwargs))
    venv.seed(seed)
    return venv


def from_slots(features: np.ndarray, slots: np.ndarray) -> Dataset:
    """Recorded decisions (a Minari dataset's ``candidate_features`` and ``candidate_slot``,
    ``powertrip_env.harness.datasets.build.load_imitation``) as labelled states: regret 0 for the
    slot taken, 1 for every other, so ``fit`` clones them."""
    slots = np.asarray(slots, dtype=np.int64)
    regret = np.ones((slots.shape[0], N_SLOTS))
    regret[np.arange(slots.shape[0]), slots] = 0.0
    return Dataset(np.asarray(features, dtype=np.float32), regret)


def train(
    env_id: str | Sequence[str] = "PowerTrip-v0",
    *,
    n_envs: int = 16,
    steps: int = 300,
    dagger: int = 3,
    beta: float = 0.0,
    epochs: int = 40,
    seed: int = 0,
    jitter: bool = False,
    start: Dataset | None = None,
    teacher: str = "rollout",
) -> tuple[Any, dict[str, Any]]:
    """Behaviour cloning on ``steps`` teacher-labelled vector steps (``n_envs`` episodes each),
    then ``dagger`` rounds of half as many steps played by the student (the teacher with
    probability ``beta``), each followed by a fit on everything so far. Several IDs label
    ``steps`` each, and the student fits all of them at once: the slots' features do not depend
    on the number of sites, so one network serves every catalogue. ``start`` adds recorded
    decisions (``from_slots``) to the first fit. Returns an SB3 PPO model whose policy is the
    student (ready for ``CandidatePolicy``, ``--model`` and PPO fine-tuning) and a summary.
    ``jitter=False`` labels on jitter-free episodes, as the benchmark plays them."""
    from stable_baselines3 import PPO

    from powertrip_env.agents import hyperparams

    started = time.monotonic()
    env_ids = [env_id] if isinstance(env_id, str) else list(env_id)
    venvs = [make_venv(e, {"jitter": jitter}, n_envs, seed) for e in env_ids]
    config = hyperparams.load_config(hyperparams.default_config_path("ppo"), "ppo")
    policy, kwargs = hyperparams.model_kwargs(config, "ppo", "candidates")
    model = PPO(policy, venvs[0], seed=seed, device="cpu", **kwargs)
    labelled = [collect(venv, steps, teacher=teacher) for venv in venvs]
    data = _union([d for d, _ in labelled] + ([start] if start is not None else []))
    last = [obs for _, obs in labelled]
    losses = fit(model.policy, data, epochs=epochs, seed=seed)
    rounds = []
    rng = np.random.default_rng(seed)
    for k in range(dagger):
        student = student_of(model.policy)
        more = []
        for i, venv in enumerate(venvs):
            got, last[i] = collect(
                venv, max(steps // 2, 1), student, beta, rng, last[i], teacher=teacher
            )
            more.append(got)
        added = _union(more)
        played = student(added.features)
        rounds.append(float(added.regret[np.arange(len(added)), played].mean()))
        data = data + added
        losses = fit(model.policy, data, epochs=epochs, seed=seed + k + 1)
    summary = {
        "env": env_ids[0] if len(env_ids) == 1 else env_ids,
        "teacher": teacher,
        "states": len(data),
        "dagger_student_regret_h": rounds,
        "final_loss": losses[-1] if losses else None,
        "seconds": round(time.monotonic() - started, 1),
    }
    return model, summary


def _union(parts: Sequence[Dataset]) -> Dataset:
    """The labelled states of ``parts``, in order."""
    out = parts[0]
    for part in parts[1:]:
        out = out + part
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``powertrip imitation``: train a student of the clairvoyant teacher and save it
    where ``--model`` reads it (``powertrip_env.harness.evaluation.evaluate``,
    ``powertrip_env.harness.reports.benchmark``)."""
    p = argparse.ArgumentParser(
        prog="powertrip imitation",
        description="Behaviour cloning and DAgger of a teacher (the clairvoyant rollouts, or "
        "Informed) over the candidate slots; saves an SB3 PPO model for --model.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    add_env(
        p,
        None,
        repeat=True,
        fixed_sites=NATIVE_VECTOR,
        default_text="PowerTrip-v0",
        what="an environment to label (one student fits every one given)",
    )
    p.add_argument("--n-envs", type=checks.positive_int, default=16)
    p.add_argument("--steps", type=checks.positive_int, default=300, help="teacher's steps")
    p.add_argument("--dagger", type=checks.non_negative_int, default=3, help="DAgger rounds")
    p.add_argument("--beta", type=float, default=0.0, help="teacher's share in DAgger rounds")
    p.add_argument("--epochs", type=checks.positive_int, default=40)
    p.add_argument(
        "--teacher",
        choices=sorted(TEACHERS),
        default="rollout",
        help="rollout: each slot played out on the true future (clairvoyant); informed: what "
        "Informed plays, told the measured track's drawn unknowns, never the future",
    )
    add_seed(p, "seeds the labelled episodes and the student's training")
    p.add_argument("--jitter", action="store_true", help="label on jittered episodes")
    p.add_argument(
        "--dataset",
        action="append",
        default=[],
        metavar="ID",
        help="a Minari dataset of powertrip_env.harness.datasets.build to clone as well"
        " (repeatable)",
    )
    add_out(p, None, what="run folder, new or empty", required=True)
    add_force(p, "replace what --out holds")
    args = p.parse_args(argv)
    try:
        if not 0.0 <= args.beta <= 1.0:
            raise checks.UsageError(f"argument --beta: {args.beta!r}: expected a share in [0, 1]")
        env_ids = args.env or ["PowerTrip-v0"]
        for env_id in env_ids:
            checks.check_env(env_id, {})
        out = checks.check_out_dir(Path(args.out), force=args.force)
        start = None
        if args.dataset:
            from powertrip_env.harness.datasets.build import load_imitation

            start = from_slots(*load_imitation(args.dataset))
    except (checks.UsageError, ValueError) as exc:
        p.exit(2, f"{p.prog}: error: {exc}\n")
    model, summary = train(
        env_ids,
        n_envs=args.n_envs,
        steps=args.steps,
        dagger=args.dagger,
        beta=args.beta,
        epochs=args.epochs,
        seed=args.seed,
        jitter=args.jitter,
        start=start,
        teacher=args.teacher,
    )
    if args.force and out.is_dir():
        clear_folder(out)
    out.mkdir(parents=True, exist_ok=True)
    path = save_model(model, out / "model.zip")
    write_text(out / "imitation.json", json.dumps(summary, indent=2) + "\n")
    print(f"trained on {summary['states']:,} labelled states in {summary['seconds']} s: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
