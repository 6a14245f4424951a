"""Parallel policy gradient (REINFORCE with a baseline) on CartPole, on Ray core.

The four steps of the RLlib talk's example, each a plain function you can call on its own:

1. a policy network: observations -> logits of a categorical distribution over actions;
2. sample experiences: `sample_episodes` plays whole episodes with the current policy;
3. postprocess: `discounted_returns` (temporal discounting), then `advantages` (minus a baseline);
4. the loss: `policy_gradient_loss`, whose gradient is the policy gradient.

Parallelism: `EpisodeSampler` actors run steps 1-3 on their own cores; the driver (the learner)
runs step 4. `train_sync` waits for every worker each iteration; `train_async` updates on
whichever batch arrives first (`ray.wait`) and sends that worker fresh weights at once.

The policy gradient (Williams 1992) with a baseline b, estimated from a batch of episodes:

    grad J(theta) ~= mean over steps t of  grad log pi(a_t | s_t) * (G_t - b_t)
    G_t = r_t + gamma * r_{t+1} + gamma^2 * r_{t+2} + ...   (to the end of t's episode)

Two modules: `reinforce` is the algorithm in one process (config, network, sampling, returns
and baselines, the loss, greedy evaluation); `parallel` runs it on Ray (the `EpisodeSampler`
actors, `train_sync`, `train_async`, the parameter-server variant, the throughput measurement).
Every name below is importable from `course_lib.pg` itself.
"""

from course_lib.pg.parallel import (
    EpisodeSampler as EpisodeSampler,
    episode_samplers as episode_samplers,
    first_finished as first_finished,
    make_policy_and_optimizer as make_policy_and_optimizer,
    make_workers as make_workers,
    measure_sampling_throughput as measure_sampling_throughput,
    train_async as train_async,
    train_sync as train_sync,
    train_with_param_server as train_with_param_server,
)
from course_lib.pg.reinforce import (
    PGConfig as PGConfig,
    PolicyNet as PolicyNet,
    advantages as advantages,
    concat_batches as concat_batches,
    discounted_returns as discounted_returns,
    evaluate_confirmed as evaluate_confirmed,
    greedy_returns as greedy_returns,
    make_policy as make_policy,
    mean_greedy_return as mean_greedy_return,
    policy_gradient_loss as policy_gradient_loss,
    sample_episodes as sample_episodes,
    time_steps as time_steps,
    update_policy as update_policy,
)
