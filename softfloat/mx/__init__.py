"""softfloat.mx: OCP MX and NVFP4 block-scaled formats, bit-exact (draft docstring)."""

from ._formats import BLOCK_FORMATS, SCALE_RULES, BlockFormat, get_block_format
from ._quantize import quantize
from ._tensor import BlockTensor, from_bits, unpack

__all__ = ["quantize", "BlockTensor", "BlockFormat", "BLOCK_FORMATS", "SCALE_RULES",
           "get_block_format", "from_bits", "unpack"]
