"""The common part of softfloat's quantized tensor classes: softfloat.dfp's DFPTensor and
softfloat.mx's BlockTensor (a class attribute ``_DATA`` names the array that carries the
tensor's shape; ``_lazy`` holds the dask intermediate of a lazy tensor, None otherwise).

Provides
    QuantizedTensor        mixin: ``shape``, ``ndim``, ``size`` of the ``_DATA`` array;
                           ``lazy`` and ``compute()`` of a tensor whose lazy form is ONE dask
                           array of records (the class turns the computed records into its
                           numpy-backed tensor: ``_from_records``)

Imports numpy only.
"""

from __future__ import annotations

import numpy as np

__all__ = ["QuantizedTensor"]


class QuantizedTensor:
    """Mixin of DFPTensor and BlockTensor (see the module docstring)."""

    __slots__ = ()

    #: the name of the array attribute whose shape is the tensor's (set by each class)
    _DATA = ""

    @property
    def shape(self):
        return getattr(self, self._DATA).shape

    @property
    def ndim(self):
        return getattr(self, self._DATA).ndim

    @property
    def size(self):
        return getattr(self, self._DATA).size

    @property
    def lazy(self) -> bool:
        """True for the result of quantize on a dask array (the class's docstring says which of
        its attributes are then dask arrays)."""
        return self._lazy is not None

    def compute(self):
        """The numpy-backed tensor: a lazy tensor's arrays and counts computed together (every
        chunk quantized once); a numpy-backed tensor returns itself."""
        if self._lazy is None:
            return self
        return self._from_records(np.asarray(self._lazy.compute()))
