# The one vocabulary kernels share with Python (mirror: spnc/_kinds.py).
cdef enum NodeKind:
    SUM = 0
    PRODUCT = 1
    LEAF = 2            # the first leaf code: every kind >= LEAF is a leaf of some registered type

cdef enum QueryMode:
    MARGINAL = 0        # sum-product: missing variables summed / integrated out
    MAX = 1             # max-product: missing variables maximised over (MPE)
