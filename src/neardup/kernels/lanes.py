"""The MinHash loop written with explicit 16-lane vectors, so that it runs 512 bits wide on a CPU
with AVX-512 while the rest of the process keeps numba's settings.

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
