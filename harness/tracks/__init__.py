"""The tracks: each kind of task declared once, in one module of its own.

* ``time``: ``KNOWN`` (the world as the scenario states it) and ``MEASURED`` (what the scenario
  states, departed from per episode), both scored on the time to accuracy;
* ``carbon``: ``CARBON``, reach the target before a deadline with the least grid carbon.

A task's ID names its track when it is registered (``powertrip_env.register_task(...,
track=...)``); ``track_of`` gives the declaration. Everything that treats tracks differently asks
the track (its rules, references, bound, board, facts and figures: ``track.Track``), so a new
kind of task is a new ``Track`` given to ``register_track``, with no file here changed::

    from powertrip_env import register_task
    from powertrip_env.harness.tracks import Track, register_track

    register_track(Track("energy", title="Leaderboard: energy", measure=ENERGY, ...))
    register_task("Energy-v0", "default", track="energy", suite=True)

A scenario that no registered task runs (a scenario file given to a tool, an ID registered with
plain ``gymnasium.register``) has joined no track: the tools play it as ``MEASURED`` when it
draws unknowns, else as ``KNOWN`` (``track_for``).
"""

from __future__ import annotations

import gymnasium as gym
import pandas as pd

from powertrip_env.harness.tracks.carbon import CARBON, CarbonTrack
from powertrip_env.harness.tracks.time import (
    KNOWN,
    MEASURED,
    MOVING,
    MeasuredTrack,
    MovingTrack,
    TimeTrack,
)
from powertrip_env.harness.tracks.track import Facts, Section, Track
from powertrip_env.tasks import task_of

TRACKS: dict[str, Track] = {track.name: track for track in (KNOWN, MEASURED, MOVING, CARBON)}
"""Every track by name, in the order their boards are laid out: the shipped ones, then a
user's, in the order they were registered."""


def register_track(track: Track) -> Track:
    """Add ``track`` so IDs can join it by its name; a second track of the same name is refused
    with a ``ValueError`` (its tasks' scores would change meaning)."""
    if not isinstance(track, Track):
        raise TypeError(f"register_track: {track!r} is not a Track")
    if track.name in TRACKS and TRACKS[track.name] is not track:
        raise ValueError(f"register_track: a track named {track.name!r} is already registered")
    TRACKS[track.name] = track
    return track


def track_named(name: str) -> Track:
    """The track called ``name``; a ``ValueError`` names the registered ones otherwise."""
    try:
        return TRACKS[name]
    except KeyError:
        raise ValueError(
            f"no track named {name!r}; registered: {', '.join(TRACKS)} (a track of your own "
            "joins with powertrip_env.harness.tracks.register_track)"
        ) from None


def track_of(env_id: str) -> Track | None:
    """The track ``env_id`` joined at registration, or ``None`` if it joined none."""
    task = task_of(env_id)
    return None if task is None else track_named(task.track)


def measure_of(env_id: str, env: gym.Env, played: pd.DataFrame) -> pd.Series:
    """Each of ``played`` (``evaluate``'s episodes of ``env``) on its track's measure, as the
    board scores it: the tool-side reading of the env's tables, which agents do not make."""
    return track_for(env_id, env).values(played, env.unwrapped.params)


def track_for(env_id: str, env: gym.Env, scenario_given: bool = False) -> Track:
    """The track that scores episodes of ``env`` (made from ``env_id``): the one its ID joined,
    unless a scenario was given in place of the ID's (``scenario_given``) or the ID joined
    none; then ``MOVING`` when the scenario's world moves, ``MEASURED`` when it draws unknowns,
    else ``KNOWN``."""
    track = None if scenario_given else track_of(env_id)
    if track is not None:
        return track
    params = env.unwrapped.params
    if params.moving:
        return MOVING
    return MEASURED if params.measured else KNOWN


__all__ = [
    "CARBON",
    "KNOWN",
    "MEASURED",
    "MOVING",
    "TRACKS",
    "CarbonTrack",
    "Facts",
    "MeasuredTrack",
    "MovingTrack",
    "Section",
    "TimeTrack",
    "Track",
    "register_track",
    "track_for",
    "track_named",
    "track_of",
]
