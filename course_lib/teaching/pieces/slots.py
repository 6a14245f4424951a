"""`slots_for(trainer, pieces)`: the attendee's pieces, guarded, in the slots of a trainer.

A trainer class (`apex.ApexTrainer`, `sac.SACTrainer`) gets its `Slots` object; notebook 03's
functions (`data_parallel.sync_sgd`, `data_parallel.async_sgd`, `pg.train_with_param_server`)
get their keyword slots as a dict. A piece whose slot the trainer does not have is refused in
one line that names the trainer that takes it, before anything starts.
"""

from __future__ import annotations

import dataclasses

from course_lib.teaching.pieces.guard import PIECES, Factory, check_keys

#: seconds a call of a piece may take before the run ends naming it
TIMEOUT_S = 30.0


def _takers() -> dict[str, str]:
    """slot -> the trainers that have it, in words (for the refusal's message)."""
    from course_lib import apex, data_parallel, pg, sac

    takers: dict[str, list[str]] = {}
    for name, slots in (("apex.ApexTrainer (notebooks 04-05)", apex.ApexSlots),
                        ("sac.SACTrainer (notebook 06)", sac.SACSlots)):
        for field in dataclasses.fields(slots):
            takers.setdefault(field.name, []).append(name)
    for fn in (data_parallel.sync_sgd, data_parallel.async_sgd, pg.train_with_param_server):
        for keyword in _keywords(fn):
            takers.setdefault(keyword, []).append(f"{fn.__module__.split('.', 1)[1]}."
                                                  f"{fn.__name__} (notebook 03)")
    return {slot: " or ".join(names) for slot, names in takers.items()}


def _keywords(fn) -> set[str]:
    """The slots of one of notebook 03's functions: its keywords that pieces fill."""
    import inspect

    return {p for p in inspect.signature(fn).parameters if p in
            {slot for piece in PIECES.values() for slot in piece.slots}}


def slots_for(trainer, pieces: dict, timeout_s: float = TIMEOUT_S):
    """`trainer`'s slots filled with `pieces` ({key: the attendee's class or function}),
    each guarded (`course_lib.teaching.pieces`); ValueError (one line) for a piece `trainer`
    never calls."""
    check_keys(pieces)
    has = ({f.name for f in dataclasses.fields(trainer.Slots)} if isinstance(trainer, type)
           else _keywords(trainer))
    name = getattr(trainer, "__qualname__", str(trainer))
    for key in pieces:
        if not set(PIECES[key].slots) & has:
            takers = _takers()
            where = " or ".join(takers.get(slot, "no trainer") for slot in PIECES[key].slots)
            raise ValueError(f"pieces: {name} never calls your {PIECES[key].name} (the "
                             f"trainers that do: {where}); leave it out here")
    if isinstance(trainer, type):
        fields = {f.name for f in dataclasses.fields(trainer.config_class)}
        if "updates_allowed" in pieces and "replay_ratio" not in fields:
            raise ValueError(f"pieces: updates_allowed needs a replay ratio (Ape-X); "
                             f"{name} sets updates per transition (utd_ratio)")
        return trainer.Slots(**trainer_slots(pieces, timeout_s))
    return function_slots(pieces, has, timeout_s)


def trainer_slots(pieces: dict, timeout_s: float) -> dict:
    """{slot: its factory} for a distributed trainer's pieces."""
    from course_lib.teaching.pieces.apex import Chunks, Epsilons, Throttle
    from course_lib.teaching.pieces.drive import DriveRound
    from course_lib.teaching.pieces.replay import DrawSlot
    from course_lib.teaching.pieces.sac import MATHS, Rollout
    from course_lib.teaching.pieces.worker import Follower, SentOutbox

    built = {"outbox": SentOutbox, "weights_follower": Follower, "drive": DriveRound,
             "rollout": Rollout, **MATHS}
    slots = {PIECES[key].slots[0]: Factory(key, piece, timeout_s, built[key])
             for key, piece in pieces.items() if key in built}
    driver = {"explorer_epsilons": Epsilons, "updates_allowed": Throttle,
              "learner_chunks": Chunks}
    slots.update({PIECES[key].slots[0]: driver[key](key, piece, timeout_s)
                  for key, piece in pieces.items() if key in driver})
    replay = {key: piece for key, piece in pieces.items() if PIECES[key].slots == ("draw",)}
    if replay:
        slots["draw"] = DrawSlot(replay, timeout_s)
    return slots


def function_slots(pieces: dict, keywords: set[str], timeout_s: float) -> dict:
    """{keyword: its value} for one of notebook 03's functions, which has `keywords`."""
    from course_lib.teaching.pieces.param import average, make_pull, make_step, server

    slots = {}
    if "average_gradients" in pieces:
        slots["average"] = average(pieces["average_gradients"], timeout_s)
    if "make_step" in keywords and {"worker_step", "cached_weights"} & set(pieces):
        slots["make_step"] = make_step(pieces, timeout_s)
    if "versioned_weights" in pieces:
        slots["ps"] = server(pieces["versioned_weights"], timeout_s)
    if "make_pull" in keywords and {"cached_weights", "prefetched_weights"} & set(pieces):
        slots["make_pull"] = make_pull(pieces, timeout_s)
    return slots
