"""BlockTensor: dequantize (exact, one rounding), pack / unpack round trips and the packed
layout, from_bits round trips, and their bad arguments."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from softfloat import mx


def _x(shape=(6, 50), seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * np.exp2(rng.integers(-8, 8, shape))).astype(np.float32)


@pytest.mark.parametrize("fmt", list(mx.BLOCK_FORMATS))
def test_pack_unpack_round_trip(fmt):
    q = mx.quantize(_x(), fmt)
    data = q.pack()
    w = q.format.bits
    assert data.dtype == np.uint8 and data.size == -(-q.size * w // 8)
    codes = mx.unpack(data, fmt, q.size)
    assert np.array_equal(codes.reshape(q.shape), q.element_bits)


def test_packed_layout_fp4_and_fp6():
    codes = np.array([0x1, 0xF, 0x7, 0x8, 0x3], dtype=np.uint8)
    q = mx.from_bits(codes, np.array([127], np.uint8), "mxfp4_e2m1", block=32)
    assert list(q.pack()) == [0xF1, 0x87, 0x03]             # low nibble first, zero padded
    c6 = np.array([0x01, 0x3F, 0x20, 0x15], dtype=np.uint8)
    q = mx.from_bits(c6, np.array([127], np.uint8), "mxfp6_e2m3", block=32)
    w = 0x01 | 0x3F << 6 | 0x20 << 12 | 0x15 << 18          # little-endian 24-bit stream
    assert list(q.pack()) == [w & 0xFF, (w >> 8) & 0xFF, w >> 16]


@pytest.mark.parametrize("fmt", list(mx.BLOCK_FORMATS))
def test_from_bits_round_trip(fmt):
    x = _x((4, 40), seed=1)
    kw = {"tensor_scale": 0.25} if fmt == "nvfp4" else {}
    q = mx.quantize(x, fmt, **kw)
    r = mx.from_bits(mx.unpack(q.pack(), fmt, q.size).reshape(q.shape), q.scale_bits, fmt,
                     **kw)
    assert np.array_equal(r.elements.view(np.uint32), q.elements.view(np.uint32))
    assert np.array_equal(r.scales, q.scales, equal_nan=True)
    assert np.array_equal(r.dequantize(), q.dequantize(), equal_nan=True)


def test_dequantize_is_exact_then_rounded_once():
    x = _x((3, 64), seed=2)
    q = mx.quantize(x, "nvfp4", tensor_scale=0.0123)
    d64 = q.dequantize(np.float64)
    for i in range(3):
        for j in range(0, 64, 7):
            want = (Fraction(float(q.elements[i, j])) * Fraction(float(q.scales[i, j // 16]))
                    * Fraction(float(np.float32(0.0123))))
            assert Fraction(float(d64[i, j])) == want
    assert np.array_equal(q.dequantize(), d64.astype(np.float32))
    m = mx.quantize(x, "mxfp8_e4m3", block=(2, 16))
    exp = np.repeat(np.repeat(m.scales, 2, axis=0), 16, axis=1)[:3, :64]
    assert np.array_equal(m.dequantize(np.float64), m.elements * exp.astype(np.float64))


def test_decode_every_code():
    sb = np.array([127], np.uint8)
    q = mx.from_bits(np.arange(256, dtype=np.uint8), sb, "mxint8", block=256)
    assert q.elements[0x7F] == 127 / 64 and q.elements[0x80] == -2.0 and q.elements[0xFF] == -1 / 64
    q = mx.from_bits(np.arange(256, dtype=np.uint8), sb, "mxfp8_e4m3", block=256)
    assert np.isnan(q.elements[0x7F]) and q.elements[0x7E] == 448.0
    s = mx.from_bits(np.zeros(2, np.uint8), np.array([0x7F, 0xFF], np.uint8), "nvfp4", block=1)
    assert np.isnan(s.scales).all()
    e = mx.from_bits(np.zeros(2, np.uint8), np.array([0, 254], np.uint8), "mxfp4_e2m1", block=1)
    assert list(e.scales) == [np.float32(2.0 ** -127), np.float32(2.0 ** 127)]


@pytest.mark.parametrize("call,err,text", [
    (lambda: mx.unpack(np.zeros(3, np.int8), "mxfp4", 4), TypeError, "uint8"),
    (lambda: mx.unpack(np.zeros(1, np.uint8), "mxfp4", 4), ValueError, "need 2 bytes"),
    (lambda: mx.unpack(np.zeros(1, np.uint8), "mxfp4", -1), ValueError, "count"),
    (lambda: mx.from_bits(np.zeros(4, np.uint8), np.zeros(2, np.uint8), "mxfp4", block=4),
     ValueError, "scale_bits has shape"),
    (lambda: mx.from_bits(np.full(4, 16, np.uint8), np.zeros(1, np.uint8), "mxfp4", block=4),
     ValueError, "element code"),
    (lambda: mx.from_bits(np.zeros(4, np.float32), np.zeros(1, np.uint8), "mxfp4", block=4),
     TypeError, "uint8"),
    (lambda: mx.from_bits(np.zeros(4, np.uint8), np.zeros(1, np.uint8), "mxfp4", block=4,
                          tensor_scale=2.0), ValueError, "nvfp4 only"),
    (lambda: mx.quantize(np.ones(4, np.float32), "mxfp4").dequantize(np.int32), TypeError,
     "float32 or float64"),
])
def test_bad_arguments(call, err, text):
    with pytest.raises(err, match=text):
        call()
