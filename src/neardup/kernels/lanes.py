"""Loops written with explicit vectors, so that they run 512 bits wide on a CPU with AVX-512 while
the rest of the process keeps numba's settings: the MinHash loop (16 lanes of 32 bits) and
:func:`byte_mask`, 64 bytes compared at once (the scans of JSON Lines blocks for newlines and for
the ends of strings), and :func:`word_bytes64`, 64 bytes classed at once (the tokenizer's ASCII
words). Beside them, the one instruction where numba's code for the same was
several: the lowest 1 bit and the 1 bits of a word (:func:`lowest_bit`, :func:`bit_count`), and
a word of bytes loaded or stored at any offset (:func:`load64`, :func:`load32`, :func:`store64`);
and one numba has none for: a cache line fetched ahead of its use (:func:`prefetch`).

On a CPU with AVX-512, LLVM's cost model prefers 256-bit vectors (the ``prefer-256-bit`` tuning
of Intel's AVX-512 models): numba's auto-vectorised loops use ymm registers. For the MinHash loop
this halves the rate of its one expensive instruction, the 32-bit multiply (``vpmulld``, the same
issue rate on ymm as on zmm). Making LLVM prefer 512 bits for the whole process (numba's CPU
features) is a setting of the user's process, not the library's, and it slowed the tokenizer.

An explicit vector type is different: LLVM lowers a ``<16 x i32>`` in the register width the CPU
has (one zmm with AVX-512; two ymm with AVX2, four xmm with SSE or NEON: the same values) whatever
the vectoriser's preference, as long as the function carries no ``min-legal-vector-width`` below
512 (numba sets none). So :func:`minhash_lanes`, a numba intrinsic, emits the loop in LLVM IR
with the permutations in the lanes: for each block of 16 permutations (a, b loaded once, the last
block masked when k is not a multiple of 16), one pass over the shingles with x broadcast, the
running minimum in a register, and no horizontal reduction at the end.

numba's cache keys a compiled kernel on the CPU's name and features (``codegen.magic_tuple()`` in
its index key): a machine without AVX-512 compiles its own copy, it is never handed this one.
"""

from __future__ import annotations

import sys

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.extending import intrinsic

LANES = 16


def _splat(builder, value, vec):
    undef = ir.Constant(vec, ir.Undefined)
    lane0 = builder.insert_element(undef, value, ir.Constant(ir.IntType(32), 0))
    return builder.shuffle_vector(lane0, undef, ir.Constant(ir.VectorType(ir.IntType(32), vec.count), [0] * vec.count))


def _is_uint32_vector(t) -> bool:
    return isinstance(t, types.Array) and t.ndim == 1 and t.layout == "C" and t.dtype == types.uint32


@intrinsic
def minhash_lanes(typingctx, x, s, a, b, out):
    """out[i] = min_j (a[i] * x[j] + b[i]) mod 2^32 over j < s, for i < len(a) (all-ones when s is
    0); x, a, b and out 1-d contiguous uint32 arrays, len(out) = len(a), s <= len(x)."""
    if not all(_is_uint32_vector(t) for t in (x, a, b, out)) or not isinstance(s, types.Integer):
        raise TypingError("minhash_lanes takes (x, s, a, b, out): 1-d contiguous uint32 arrays and an integer s")

    def codegen(context, builder, signature, args):
        tx, ts, ta, tb, to = signature.args
        xs, a_, b_, out_ = (context.make_array(t)(context, builder, v)
                            for t, v in zip((tx, ta, tb, to), (args[0], args[2], args[3], args[4])))
        count = context.cast(builder, args[1], ts, types.intp)
        i32, intp = ir.IntType(32), context.get_value_type(types.intp)
        vec, mask_t = ir.VectorType(i32, LANES), ir.VectorType(ir.IntType(1), LANES)
        ptr = ir.PointerType()
        module = builder.module
        load = cgutils.get_or_insert_function(module, ir.FunctionType(vec, [ptr, i32, mask_t, vec]),
                                              f"llvm.masked.load.v{LANES}i32.p0")
        store = cgutils.get_or_insert_function(module, ir.FunctionType(ir.VoidType(), [vec, ptr, i32, mask_t]),
                                               f"llvm.masked.store.v{LANES}i32.p0")
        align = ir.Constant(i32, 4)
        lane = ir.Constant(vec, list(range(LANES)))
        zeros = ir.Constant(vec, [0] * LANES)
        acc = cgutils.alloca_once(builder, vec)  # in a register after LLVM's mem2reg
        k = builder.extract_value(a_.shape, 0)
        blocks = builder.udiv(builder.add(k, ir.Constant(intp, LANES - 1)), ir.Constant(intp, LANES))
        with cgutils.for_range(builder, blocks) as block:
            first = builder.mul(block.index, ir.Constant(intp, LANES))
            # lanes past k (the last block when k is not a multiple of 16) neither loaded nor stored
            mask = builder.icmp_unsigned("<", lane, _splat(builder, builder.trunc(builder.sub(k, first), i32), vec))
            av = builder.call(load, [builder.gep(a_.data, [first]), align, mask, zeros])
            bv = builder.call(load, [builder.gep(b_.data, [first]), align, mask, zeros])
            builder.store(ir.Constant(vec, [0xFFFFFFFF] * LANES), acc)
            with cgutils.for_range(builder, count) as shingle:
                xv = _splat(builder, builder.load(builder.gep(xs.data, [shingle.index])), vec)
                v = builder.add(builder.mul(av, xv), bv)
                m = builder.load(acc)
                builder.store(builder.select(builder.icmp_unsigned("<", v, m), v, m), acc)
            builder.call(store, [builder.load(acc), builder.gep(out_.data, [first]), align, mask])
        return context.get_dummy_value()

    return types.void(x, s, a, b, out), codegen


BYTE_LANES = 64  # bytes compared at once by :func:`byte_mask` (one zmm with AVX-512BW)


def _is_byte_vector(t) -> bool:
    return isinstance(t, types.Array) and t.ndim == 1 and t.layout == "C" and t.dtype == types.uint8


@intrinsic
def byte_mask(typingctx, data, p, c1, c2, below):
    """The bytes of data[p:p+64] that are ``c1``, ``c2`` or below ``below`` (unsigned; 0: none),
    as the bits of a uint64 (bit j: byte p + j). ``data`` a 1-d contiguous uint8 array, 0 <= p,
    p + 64 <= len(data) (not checked).

    One unaligned load of a ``<64 x i8>``, three compares, their lanes as the bits of one 64-bit
    word: a ``vpcmpb`` each into a mask register with AVX-512BW (two halves and ``vpmovmskb``
    with AVX2); the constants folded where the caller's are."""
    if not _is_byte_vector(data) or not all(isinstance(t, types.Integer) for t in (p, c1, c2, below)):
        raise TypingError("byte_mask takes (data, p, c1, c2, below): a 1-d contiguous uint8 array and integers")

    def codegen(context, builder, signature, args):
        tdata = signature.args[0]
        arr = context.make_array(tdata)(context, builder, args[0])
        i8, i64 = ir.IntType(8), ir.IntType(64)
        vec = ir.VectorType(i8, BYTE_LANES)
        pos = context.cast(builder, args[1], signature.args[1], types.intp)
        c1_, c2_, below_ = (_splat(builder, builder.trunc(context.cast(builder, v, t, types.int64), i8), vec)
                            for v, t in zip(args[2:], signature.args[2:]))
        v = builder.load(builder.bitcast(builder.gep(arr.data, [pos]), vec.as_pointer()), align=1)
        hits = builder.or_(builder.or_(builder.icmp_unsigned("==", v, c1_), builder.icmp_unsigned("==", v, c2_)),
                           builder.icmp_unsigned("<", v, below_))
        return builder.bitcast(hits, i64)

    return types.uint64(data, p, c1, c2, below), codegen


@intrinsic
def word_bytes64(typingctx, data, p):
    """(word bytes, bytes not ASCII) of data[p:p+64], each as the bits of a uint64 (bit j: byte
    p + j): a word byte is [0-9A-Za-z_], as :func:`neardup.kernels.charclasses.char_classes` says of
    ASCII (the tokenizer's ASCII path, :func:`neardup.kernels.shingles._words_ascii_v2`), one not
    ASCII has its high bit set. ``data`` a 1-d contiguous uint8 array, 0 <= p, p + 64 <= len(data)
    (not checked).

    One unaligned load of a ``<64 x i8>``, five compares, their lanes as the bits of 64-bit words:
    ``vpcmpub`` into mask registers with AVX-512BW (two halves and ``vpmovmskb`` with AVX2), where
    the same classes eight bytes at a time in 64-bit words took ~20 operations (SWAR)."""
    if not _is_byte_vector(data) or not isinstance(p, types.Integer):
        raise TypingError("word_bytes64 takes (data, p): a 1-d contiguous uint8 array and an integer")

    def codegen(context, builder, signature, args):
        arr = context.make_array(signature.args[0])(context, builder, args[0])
        i8, i64 = ir.IntType(8), ir.IntType(64)
        vec = ir.VectorType(i8, BYTE_LANES)

        def splat(c):
            return ir.Constant(vec, [c] * BYTE_LANES)

        pos = context.cast(builder, args[1], signature.args[1], types.intp)
        v = builder.load(builder.bitcast(builder.gep(arr.data, [pos]), vec.as_pointer()), align=1)
        # a letter in either case: (b | 0x20) - 'a' below 26; a digit: b - '0' below 10
        letter = builder.icmp_unsigned("<", builder.sub(builder.or_(v, splat(0x20)), splat(ord("a"))), splat(26))
        digit = builder.icmp_unsigned("<", builder.sub(v, splat(ord("0"))), splat(10))
        under = builder.icmp_unsigned("==", v, splat(ord("_")))
        word = builder.or_(builder.or_(letter, digit), under)
        high = builder.icmp_signed("<", v, splat(0))
        return context.make_tuple(builder, signature.return_type,
                                  [builder.bitcast(word, i64), builder.bitcast(high, i64)])

    return types.UniTuple(types.uint64, 2)(data, p), codegen


def _word_codegen(name, *flags):
    """The code of LLVM's ``llvm.NAME.i64`` of an integer taken as a uint64 (``flags``: its
    constant i1 arguments after the word)."""
    def codegen(context, builder, signature, args):
        i64, i1 = ir.IntType(64), ir.IntType(1)
        f = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i64, [i64] + [i1] * len(flags)),
                                           f"llvm.{name}.i64")
        value = context.cast(builder, args[0], signature.args[0], types.uint64)
        return builder.call(f, [value] + [ir.Constant(i1, x) for x in flags])

    return codegen


def _check_word(name, word):
    if not isinstance(word, types.Integer):
        raise TypingError(f"{name} takes an integer")


@intrinsic
def lowest_bit(typingctx, word):
    """The bit number of the lowest 1 bit of a uint64 (64 for 0): one ``tzcnt``."""
    _check_word("lowest_bit", word)
    return types.int64(word), _word_codegen("cttz", 0)


@intrinsic
def bit_count(typingctx, word):
    """The 1 bits of a uint64: one ``popcnt``."""
    _check_word("bit_count", word)
    return types.int64(word), _word_codegen("ctpop")


def _little_endian(builder, value, word):
    """``value`` (an integer of type ``word``) as memory holds it lowest byte first: itself, or
    byte-swapped on a big-endian CPU (a swap undoes itself: for loads and stores alike)."""
    if sys.byteorder == "big":
        bswap = cgutils.get_or_insert_function(builder.module, ir.FunctionType(word, [word]),
                                               f"llvm.bswap.i{word.width}")
        return builder.call(bswap, [value])
    return value


@intrinsic
def store64(typingctx, out, at, value):
    """out[at:at+8] = value, lowest byte first: one unaligned 64-bit store (a byte swap before it
    on a big-endian CPU), where numba's code for eight byte stores was eight shifts, masks and
    stores. ``out`` a 1-d contiguous uint8 array, 0 <= at, at + 8 <= len(out) (not checked)."""
    if not _is_byte_vector(out) or not isinstance(at, types.Integer) or not isinstance(value, types.Integer):
        raise TypingError("store64 takes (out, at, value): a 1-d contiguous uint8 array and two integers")

    def codegen(context, builder, signature, args):
        arr = context.make_array(signature.args[0])(context, builder, args[0])
        i64 = ir.IntType(64)
        pos = context.cast(builder, args[1], signature.args[1], types.intp)
        v = _little_endian(builder, context.cast(builder, args[2], signature.args[2], types.uint64), i64)
        builder.store(v, builder.bitcast(builder.gep(arr.data, [pos]), i64.as_pointer()), align=1)
        return context.get_dummy_value()

    return types.void(out, at, value), codegen


def _load_codegen(bits):
    """The code of data[at:at+bits/8] as a little-endian number: one unaligned load (a byte swap
    after it on a big-endian CPU)."""
    word = ir.IntType(bits)

    def codegen(context, builder, signature, args):
        arr = context.make_array(signature.args[0])(context, builder, args[0])
        pos = context.cast(builder, args[1], signature.args[1], types.intp)
        return _little_endian(builder, builder.load(builder.bitcast(builder.gep(arr.data, [pos]), word.as_pointer()),
                                                    align=1), word)

    return codegen


def _check_load(name, data, at):
    if not _is_byte_vector(data) or not isinstance(at, types.Integer):
        raise TypingError(f"{name} takes (data, at): a 1-d contiguous uint8 array and an integer")


@intrinsic
def load64(typingctx, data, at):
    """data[at:at+8] as a uint64, lowest byte first (the reverse of :func:`store64`): one
    unaligned 64-bit load, where numba's code for eight byte loads was eight loads, shifts and
    ORs. ``data`` a 1-d contiguous uint8 array, 0 <= at, at + 8 <= len(data) (not checked)."""
    _check_load("load64", data, at)
    return types.uint64(data, at), _load_codegen(64)


@intrinsic
def load32(typingctx, data, at):
    """data[at:at+4] as a uint32, lowest byte first: :func:`load64` of four bytes
    (at + 4 <= len(data), not checked)."""
    _check_load("load32", data, at)
    return types.uint32(data, at), _load_codegen(32)


@intrinsic
def prefetch(typingctx, address):
    """A hint, no load: the cache line of ``address`` (an integer, any address: a prefetch never
    faults) fetched for a read soon (LLVM's ``llvm.prefetch``, ``prefetcht0`` on x86)."""
    if not isinstance(address, types.Integer):
        raise TypingError("prefetch takes an integer address")

    def codegen(context, builder, signature, args):
        ptr, i32 = ir.PointerType(), ir.IntType(32)
        f = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [ptr, i32, i32, i32]),
                                           "llvm.prefetch.p0")
        at = builder.inttoptr(context.cast(builder, args[0], signature.args[0], types.intp), ptr)
        builder.call(f, [at, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])  # read, keep, data
        return context.get_dummy_value()
    return types.void(address), codegen
