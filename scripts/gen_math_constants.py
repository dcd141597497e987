#!/usr/bin/env python3
"""Prints the constants of server/sim/math/functions.h and trig.cc, computed with mpmath.

Every table there was pasted from this script's output; rerun it to check them:
  python3 scripts/gen_math_constants.py
Each irrational constant c is printed as a pair hi = fl(c), lo = fl(c - hi).
"""
import mpmath

mpmath.mp.prec = 2000


def d(value):
    """The double nearest `value`, as a round-trip C++ literal."""
    return repr(float(value))


def pair(value):
    hi = mpmath.mpf(float(value))
    return d(hi), d(value - hi)


# Exp: 2^(j/32), j = 0..31, as hi + lo.
print("// kExp2Table: 2^(j/32) as {hi, lo}.")
for j in range(32):
    hi, lo = pair(mpmath.power(2, mpmath.mpf(j) / 32))
    print(f"    {{{hi}, {lo}}},")

# ln 2 / 32 and ln 2 as hi + lo: the hi parts are cleared of their low bits in the C++.
print("ln2 =", pair(mpmath.log(2)))
print("ln2/32 =", pair(mpmath.log(2) / 32))
print("32/ln2 =", d(32 / mpmath.log(2)))

# Atan: c_k = fl(tan(k pi / 12)), and the four bases per k: atan(c), pi/2 - atan(c),
# pi - atan(c), pi/2 + atan(c).
pi = mpmath.pi
print("// kAtanReference: c_k = fl(tan(k pi / 12)).")
cs = [mpmath.mpf(float(mpmath.tan(k * pi / 12))) for k in range(4)]
for k, c in enumerate(cs):
    print(f"c[{k}] = {d(c)}")
print("// midpoints tan((2k+1) pi / 24):", [d(mpmath.tan((2 * k + 1) * pi / 24)) for k in range(3)])
for name, fn in [("direct", lambda a: a), ("inverted", lambda a: pi / 2 - a),
                 ("negative", lambda a: pi - a), ("negative inverted", lambda a: pi / 2 + a)]:
    print(f"// {name}")
    for k, c in enumerate(cs):
        hi, lo = pair(fn(mpmath.atan(c)))
        print(f"    {{{hi}, {lo}}},")

# Payne-Hanek: the bits of 2/pi after the binary point, 64 to a word.
words = 20
bits = int(mpmath.floor((2 / pi) * mpmath.power(2, 64 * words)))
print("// k2OverPiBits")
out = []
for i in range(words):
    out.append("0x%016X" % ((bits >> (64 * (words - 1 - i))) & ((1 << 64) - 1)))
for i in range(0, words, 4):
    print("    " + ", ".join(out[i:i + 4]) + ",")
print("pi/2 =", pair(pi / 2))
print("pi =", pair(pi))

# SinCos's Cody-Waite split of pi/2 (trig.h): head and middle of 33 bits, then the tail.
import struct


def clear_low_bits(value, n):
    word = struct.unpack("<Q", struct.pack("<d", float(value)))[0] & ~((1 << n) - 1)
    return mpmath.mpf(struct.unpack("<d", struct.pack("<Q", word))[0])


head = clear_low_bits(pi / 2, 20)
middle = clear_low_bits(pi / 2 - head, 20)
print("pi/2 head, middle, tail =", d(head), d(middle), d(pi / 2 - head - middle))
print("pi/2 rest (middle + tail) =", d(pi / 2 - head))
