import pickle, sys, time
import numpy as np
from workers.query.selection import FusedOrder, Reuse, select, with_head
from workers.query.presets import SERVED
caps = pickle.load(open(sys.argv[1], "rb"))
def t(fn, n=3):
    best = []
    for _ in range(n):
        t0 = time.perf_counter()
        for routes in caps:
            fn(routes)
        best.append(time.perf_counter() - t0)
    return 1000 * min(best) / len(caps)
print("FusedOrder init  %.2f ms" % t(lambda r: FusedOrder(r, reuse=Reuse())))
def sel(r):
    reuse = Reuse(); f = FusedOrder(r, reuse=reuse)
    return select(f, 100, len(r), SERVED.pool_factor, SERVED.diversity_lambda, reuse=reuse)
print("+ select         %.2f ms" % t(sel))
def both(r):
    reuse = Reuse(); f = FusedOrder(r, reuse=reuse)
    ch = select(f, 100, len(r), SERVED.pool_factor, SERVED.diversity_lambda, reuse=reuse)
    return with_head(r, ch, 100, SERVED.head, reuse=reuse)
print("+ with_head      %.2f ms" % t(both))
