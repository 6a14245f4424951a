"""Small networks, the two weight helpers and the device helpers every algorithm shares.

Weights travel between processes as a plain dict of numpy arrays, never as torch tensors or
modules: numpy arrays go into Ray's object store once (`ray.put`) and every reader on the node
maps the same memory (zero-copy), so broadcasting weights to N workers costs one copy, not N.

    weights = get_weights(policy)        # {"net.0.weight": array(64, 4), ...}
    ref = ray.put(weights)               # one copy in the object store
    set_weights(other_policy, ray.get(ref))
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn


def mlp(sizes: list[int], activation: type[nn.Module] = nn.Tanh) -> nn.Sequential:
    """A fully connected network: Linear layers of `sizes`, `activation` between them.

    mlp([4, 64, 64, 2]) maps (B, 4) -> (B, 2); there is no activation after the last layer.
    """
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(activation())
    return nn.Sequential(*layers)


def get_weights(module: nn.Module) -> dict[str, np.ndarray]:
    """The module's parameters and buffers as {name: numpy array}, copied off the module.

    The copy matters: `tensor.numpy()` shares memory, so without it the next optimiser step
    would silently change weights we already handed to someone else.
    """
    return {name: value.detach().cpu().numpy().copy()
            for name, value in module.state_dict().items()}


def set_weights(module: nn.Module, weights: dict[str, np.ndarray]) -> None:
    """Load {name: numpy array} (from `get_weights`) into `module`, in place.

    Arrays that come out of Ray's object store are read-only; `torch.tensor` copies them, so
    the module never points into shared memory. Missing or unexpected names raise (strict).
    """
    module.load_state_dict({name: torch.tensor(value) for name, value in weights.items()})


def to_cpu(value):
    """A snapshot of nested dicts/lists with every tensor copied to the CPU (a plain
    state_dict shares memory with the live model, and would change as training goes on)."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().clone()
    if isinstance(value, dict):
        return {k: to_cpu(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(to_cpu(v) for v in value)
    return value


def adam(params, lr: float, device: torch.device) -> torch.optim.Adam:
    """Adam, fused (one kernel for all parameters: several times faster for small nets) on the
    devices that support it, the plain loop elsewhere (e.g. Apple's mps)."""
    return torch.optim.Adam(params, lr=lr, fused=device.type in ("cpu", "cuda"))


def default_device() -> torch.device:
    """The first GPU when one is visible, else the CPU (a single process; a learner actor
    trains on the device it reserved: `ray_tools.reserved_device`)."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def device_of(net: nn.Module) -> torch.device:
    """Where `net`'s parameters live (the CPU for a net without any)."""
    param = next(net.parameters(), None)
    return param.device if param is not None else torch.device("cpu")


def batch_to_tensors(batch: dict[str, np.ndarray], device: torch.device) -> dict[str, torch.Tensor]:
    """A replay batch as tensors on `device` (copies: arrays from Ray are read-only)."""
    return {name: torch.tensor(value, device=device) for name, value in batch.items()
            if name != "indices"}
