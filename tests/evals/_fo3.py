import pickle, sys, time
from workers.query.selection import FusedOrder, Reuse, select, with_head
from workers.query.presets import SERVED
caps = pickle.load(open(sys.argv[1], "rb"))
for _ in range(5):
    for r in caps:
        reuse = Reuse(); f = FusedOrder(r, reuse=reuse)
        ch = select(f, 100, len(r), SERVED.pool_factor, SERVED.diversity_lambda, reuse=reuse)
        with_head(r, ch, 100, SERVED.head, reuse=reuse)
