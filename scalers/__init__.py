"""Loss scalers: numpy in, numpy out.

Provides StaticLossScaler, DynamicLossScaler (PyTorch GradScaler by default; presets for apex,
DeepSpeed and OpenSeq2Seq's Backoff), LogNormalLossScaler (OpenSeq2Seq's LogMax),
PerTensorLossScaler (one power-of-two scale per gradient tensor) and from_deepspeed_config.
The reference semantics are in docs/loss-scaling.md.

Must not import autograd or softfloat: a scaler sees a list of numpy gradient arrays and a
found-inf flag, nothing else (DESIGN.md, "Layers").
"""

from ._base import LossScaler
from .config import from_deepspeed_config
from .dynamic import DynamicLossScaler, LossScaleAtMinimumError
from .lognormal import LogNormalLossScaler
from .per_tensor import PerTensorLossScaler
from .static import StaticLossScaler

__all__ = [
    "DynamicLossScaler",
    "LogNormalLossScaler",
    "LossScaleAtMinimumError",
    "LossScaler",
    "PerTensorLossScaler",
    "StaticLossScaler",
    "from_deepspeed_config",
]
