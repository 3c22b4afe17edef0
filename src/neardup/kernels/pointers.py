"""Arrays at raw addresses, inside kernels: the pair stage reads the work dir's files where they
lie, each block's file memory-mapped on its own, with one kernel call over all of them; numba has
no list of arrays that costs nothing to make (a typed List compiles its methods in every process),
so a kernel gets the arrays' addresses (``ndarray.ctypes.data``, int64) and makes its views here.
The caller holds the arrays until the kernel returns."""

from __future__ import annotations

import numba as nb
from numba import types
from numba.extending import intrinsic

from .compile import kernel

__all__ = ["bytes_at", "uint64_at"]


def _pointer_to(item):
    @intrinsic
    def pointer(typingctx, address):
        sig = types.CPointer(item)(types.int64)

        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], context.get_value_type(signature.return_type))

        return sig, codegen
    return pointer


_uint8_pointer = _pointer_to(types.uint8)
_uint64_pointer = _pointer_to(types.uint64)


@kernel(inline="always")
def bytes_at(address, size):
    """The uint8 array of ``size`` items at ``address``."""
    return nb.carray(_uint8_pointer(address), size)


@kernel(inline="always")
def uint64_at(address):
    """The uint64 at ``address`` (8-byte aligned)."""
    return nb.carray(_uint64_pointer(address), 1)[0]
