"""autograd: a reverse-mode engine in which every forward and backward op is rounded by an
explicit precision policy, on top of softfloat.

- :class:`Tensor` / :class:`Parameter` (numpy carriers tagged with a softfloat format),
  ``backward()``, :func:`no_grad`, gradient hooks (``register_hook``); the class lives in
  ``autograd._tensor`` and the op modules of ``autograd.ops`` attach its operators;
- ``autograd.functional`` (alias ``F``): every op with its VJP;
- ``autograd.nn``: modules with PyTorch's weight layouts;
- ``autograd.policy``: precision policies (O0, O1, O2, O3, bf16, dfp16, fp64, and the fp8
  recipes fp8_delayed, fp8_current) and :func:`use_policy`;
- ``autograd.recipes``: Transformer Engine's per-tensor fp8 recipes (DelayedScaling,
  Float8CurrentScaling), their state and instrumentation;
- ``autograd.instrument``: per-layer histograms and underflow/overflow fractions;
- ``autograd.gradcheck``: float64 central-difference gradient checks.

Imports numpy and softfloat only; never scalers, models or matplotlib.
"""

from . import ops  # first: attaches the operators (+, @, x[i], .sum()...) to Tensor
from . import functional, instrument, nn, policy, recipes
from . import functional as F
from ._rng import default_generator, get_rng_state, manual_seed, set_rng_state
from ._tensor import (
    Parameter,
    RemovableHandle,
    Tensor,
    enable_grad,
    is_grad_enabled,
    no_grad,
    tensor,
)
from .gradcheck import check_grads
from .policy import (
    Policy,
    current_policy,
    get_policy,
    list_policies,
    set_default_policy,
    use_policy,
)

# ----- optimizers and the mixed-precision wrapper ------------------------------------------------
# They code against Parameter.data (carrier) and Parameter.grad (array or None) only.
from .mixed import MixedPrecisionOptimizer, StepResult  # noqa: E402
from .optim import SGD, Adam, AdamW, Optimizer  # noqa: E402


__all__ = [
    "SGD", "Adam", "AdamW", "Optimizer", "MixedPrecisionOptimizer", "StepResult",
    "F",
    "Parameter",
    "Policy",
    "RemovableHandle",
    "Tensor",
    "check_grads",
    "current_policy",
    "default_generator",
    "enable_grad",
    "functional",
    "get_policy",
    "get_rng_state",
    "instrument",
    "is_grad_enabled",
    "list_policies",
    "manual_seed",
    "nn",
    "no_grad",
    "ops",
    "policy",
    "recipes",
    "set_default_policy",
    "set_rng_state",
    "tensor",
    "use_policy",
]
