"""Checkers for notebook 04, replay."""

from __future__ import annotations

from course_lib.teaching.exercises.core import _Failed, _Spy, checker, require_close


class _CountingArray:
    """A read-only array that counts the entries read through it (a slice counts its length)."""

    def __init__(self, values):
        import numpy as np

        self.values, self.reads = np.asarray(values), 0

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, key):
        import numpy as np

        self.reads += int(np.size(self.values[key]))
        return self.values[key]


@checker(4, "find_prefix_sum", "one descent from the root, two reads per level.")
def check_find_prefix_sum(find_prefix_sum):
    """find_prefix_sum(sums, first_leaf, target) must return the slot whose prefix-sum interval
    holds `target` (never a zero-priority slot), reading O(log N) entries of the tree."""
    import numpy as np

    from course_lib.replay.sumtree import SumTree

    rng = np.random.default_rng(0)
    priorities = rng.random(13)
    priorities[[2, 3, 9]] = 0.0                       # empty slots: never to be sampled
    tree = SumTree(len(priorities))
    tree.set(np.arange(len(priorities)), priorities)
    edges = np.cumsum(priorities)
    limit = 2 * tree.depth + 2
    for target in [0.0, *rng.random(50) * edges[-1]]:
        sums = _CountingArray(tree.sums)
        slot = find_prefix_sum(sums, tree.first_leaf, float(target))
        expected = int(np.searchsorted(edges, target, side="right"))
        if slot != expected:
            raise _Failed(f"for target {target:.3f} it returned slot {slot!r}, expected "
                          f"{expected} (prefix sums {np.round(edges, 2).tolist()}).",
                          "Start at node 1; go left if target < sums[left], else subtract "
                          "sums[left] and go right; the slot is node - first_leaf.")
        if sums.reads > limit:
            raise _Failed(f"it read {sums.reads} entries of the tree for one search; a descent "
                          f"over {tree.depth} levels needs at most {limit}.",
                          "Do not scan the leaves: read only the left child on each level.")


@checker(4, "stratified_targets",
         "one uniform draw per segment.")
def check_stratified_targets(stratified_targets):
    """stratified_targets(total, k, rng): one uniform draw in each of k equal segments."""
    import numpy as np

    got = np.asarray(stratified_targets(10.0, 5, np.random.default_rng(0)), dtype=float)
    if got.shape != (5,):
        raise _Failed(f"it returned shape {got.shape}, expected (5,).",
                      "One target per segment.")
    segment = np.floor(got / 2.0)
    if not np.array_equal(segment, np.arange(5)):
        raise _Failed(f"targets {np.round(got, 2)} are not one per segment [0,2), [2,4), ...",
                      "Target i = (i + u_i) * total / k with u_i uniform in [0, 1).")
    again = np.asarray(stratified_targets(10.0, 5, np.random.default_rng(1)), dtype=float)
    if np.allclose(got, again):
        raise _Failed("the targets do not depend on the random generator.",
                      "Draw u with rng.random(k).")


@checker(4, "importance_weights",
         "(N P)^-beta, scaled so the largest is 1: N cancels.")
def check_importance_weights(importance_weights):
    """importance_weights(probs, beta): the weights of a batch drawn with probabilities
    `probs` (a batch's: they need not sum to 1), (N P)^-beta normalised by the largest."""
    import numpy as np

    probs = np.array([0.004, 0.001, 0.002, 0.001, 0.0005])   # a batch of 5 from a big buffer
    for beta in (0.4, 1.0, 0.0):
        expected = (probs / probs.min()) ** -beta
        got = np.asarray(importance_weights(probs, beta), dtype=float)
        if got.shape != probs.shape:
            raise _Failed(f"it returned shape {got.shape}, expected {probs.shape}.",
                          "One weight per sampled probability.")
        if beta and np.allclose(got, (probs / probs.max()) ** beta):
            raise _Failed(f"for beta={beta} it gave the likeliest transition the largest "
                          "weight: it over-weights what is already over-sampled.",
                          "The correction is the inverse of the over-sampling: (N P)^-beta.")
        require_close(got, expected, f"for P={probs.tolist()} and beta={beta} it gave "
                      f"{np.round(got, 3)}, expected {np.round(expected, 3)}.",
                      "Uniform sampling would draw each of N transitions with 1/N; weigh each "
                      "by (1/N) / P(i), to the power beta, then divide by the largest weight.")


@checker(4, "prioritized_sample",
         "stratified targets, descended, weighted: a batch the learner can train on.")
def check_prioritized_sample(prioritized_sample):
    """prioritized_sample(tree, batch_size, beta, rng) -> (slots, weights): slot i where
    segment i of the prefix sums lies (never an empty slot), weights (P / P_min)^-beta,
    different batches for different generators."""
    import numpy as np

    from course_lib.replay.sumtree import SumTree
    from course_lib.teaching.pieces.replay import expected_weights, segment_slots

    rng = np.random.default_rng(0)
    priorities = rng.random(200) ** 4                 # a few large, many small
    priorities[rng.choice(200, 20, replace=False)] = 0.0
    tree = SumTree(len(priorities))
    tree.set(np.arange(len(priorities)), priorities)
    seen = []
    for seed, k, beta in ((1, 8, 0.4), (2, 8, 0.4), (3, 5, 1.0)):
        got = prioritized_sample(tree, k, beta, np.random.default_rng(seed))
        if not (isinstance(got, tuple) and len(got) == 2):
            raise _Failed(f"it returned {type(got).__name__}, not a pair (slots, weights).",
                          "return slots, weights")
        slots, weights = (np.asarray(x) for x in got)
        if slots.shape != (k,) or weights.shape != (k,):
            raise _Failed(f"for a batch of {k} it returned slots of shape {slots.shape} and "
                          f"weights of shape {weights.shape}.", "One slot and one weight per "
                          "target: stratified_targets(tree.total, batch_size, rng).")
        bounds = segment_slots(tree, k, len(priorities) - 1)
        wrong = np.flatnonzero((slots < bounds[:-1]) | (slots > bounds[1:]) |
                               (tree.leaves(np.clip(slots, 0, len(priorities) - 1)) <= 0))
        if len(wrong):
            i = wrong[0]
            raise _Failed(f"slot {i} of the batch is {slots[i]}, but segment {i} of the prefix "
                          f"sums lies in slots {bounds[i]} to {bounds[i + 1]}.",
                          "Descend each target: find_prefix_sum(tree.sums, tree.first_leaf, u).")
        expected = expected_weights(tree.leaves(slots) / tree.total, beta)
        require_close(weights, expected, f"for slots {slots.tolist()} and beta={beta} it gave "
                      f"weights {np.round(weights, 3)}, expected {np.round(expected, 3)}.",
                      "P(i) = tree.leaves(slots) / tree.total, then importance_weights(P, beta).")
        seen.append(slots.tolist())
    if seen[0] == seen[1]:
        raise _Failed("two generators gave the same batch: it does not draw from `rng`.",
                      "Pass rng on to stratified_targets.")


def _logging_replay():
    """A replay actor (capacity 64, items x = 0..63) that logs the ids of every batch it hands
    out and of every priority update, and shows its sum tree's leaves."""
    import numpy as np
    import ray

    from course_lib.replay import ReplayStore

    @ray.remote(num_cpus=0)
    class LoggingReplay(ReplayStore):
        def __init__(self):
            super().__init__(64, {"x": ((), np.int64)}, alpha=0.6, seed=0)
            self.add({"x": np.arange(64)})
            self.sampled_ids, self.updated_ids = [], []

        def sample(self, batch_size, beta=0.4):
            batch = super().sample(batch_size, beta)
            self.sampled_ids.append(batch["indices"].tolist())
            return batch

        def update_priorities(self, indices, priorities):
            self.updated_ids.append(np.asarray(indices).tolist())
            return super().update_priorities(indices, priorities)

        def log(self):
            return self.sampled_ids, self.updated_ids, self.buffer.tree.leaves(np.arange(64))

    return LoggingReplay.remote()


@checker(4, "learner_loop", "each batch's priorities go back to that batch's transitions, the "
         "next batch in flight while it trains.")
def check_learner_loop(learner_loop):
    """Find the bug: learner_loop(replay, train_step, updates, batch_size) must write each
    batch's new priorities to the ids of that same batch: the checker reads the replay's call
    log and its sum tree, whose leaf for item x must hold the priority of x's own TD error.
    And it must prefetch: while train_step k runs, the sample of batch k + 1 has been asked
    for (counted in the calls made on the replay's handle, not timed)."""
    import numpy as np
    import ray

    replay, calls, asked = _logging_replay(), [], []

    def train_step(batch):
        asked.append(len(calls))                  # samples requested while this step trains
        return 0.1 + 0.01 * batch["x"]

    try:
        learner_loop(_Spy(replay, calls, "sample"), train_step, 5, 8)
        sampled, updated, leaves = ray.get(replay.log.remote())
    finally:
        ray.kill(replay)
    if len(updated) != 5:
        raise _Failed(f"it made {len(updated)} priority updates for 5 learner steps.",
                      "One update_priorities call per batch trained on.")
    for step, ids in enumerate(updated):
        if ids not in sampled:
            raise _Failed(f"update {step + 1} wrote to ids {ids}, which no sample returned.",
                          "Pass back batch[\"indices\"].")
        if ids != sampled[step]:
            raise _Failed(f"update {step + 1} wrote batch {step + 1}'s priorities to the ids of "
                          f"batch {sampled.index(ids) + 1}, the one sampled next: the sum "
                          "tree now favours transitions for other transitions' errors.",
                          "Try it with a train_step that returns each transition's number, "
                          "and print the ids each update_priorities call gets.",
                          "`batch = ray.get(next_batch)` runs before "
                          "`replay.update_priorities.remote(batch[\"indices\"], errors)`, so "
                          "the errors go to the next batch's ids: write them back first.")
    touched = sorted({i for ids in updated for i in ids})
    own = (0.1 + 0.01 * np.array(touched) + 1e-6) ** 0.6
    require_close(leaves[touched], own, "a leaf of the sum tree does not hold the priority of "
                  "its own transition's TD error.",
                  "Write |TD error| of batch position j to batch[\"indices\"][j].")
    if waited := [k for k, n in enumerate(asked, start=1) if k < len(asked) and n <= k]:
        raise _Failed(f"while train step {waited[0]} ran, its next batch had not been asked "
                      "for: the learner waits for the replay actor before every step.",
                      "Ask for the next batch (replay.sample.remote) before you train on the "
                      "current one, and ray.get it after.")


@checker(4, "td_target",
         "bootstraps after a time limit, not after a terminal state.")
def check_td_target(td_target):
    """td_target(reward, discount, terminated, next_q): bootstrap unless truly terminated."""
    import numpy as np

    reward = np.array([1.0, 1.0, 0.5])
    discount = np.array([0.99, 0.99**3, 0.99**2])
    terminated = np.array([False, True, False])     # the last one was truncated: bootstrap
    next_q = np.array([10.0, 10.0, 4.0])
    expected = reward + discount * (1 - terminated) * next_q
    got = np.asarray(td_target(reward, discount, terminated, next_q), dtype=float)
    if got.shape != expected.shape:
        raise _Failed(f"it returned shape {got.shape}, expected {expected.shape}.",
                      "Compute it element-wise on the arrays.")
    if np.isclose(got[1], expected[1] + discount[1] * next_q[1]):
        raise _Failed("it bootstraps from a terminal state.",
                      "Multiply the bootstrap term by (1 - terminated).")
    if not np.allclose(got, expected):
        raise _Failed(f"it gave {np.round(got, 3)}, expected {np.round(expected, 3)}.",
                      "target = reward + discount * (1 - terminated) * next_q; the discount "
                      "already holds gamma**k.")
