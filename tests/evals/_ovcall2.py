import time, numpy as np
from streams.settings import Settings
from streams.factories import model_embedder
e = model_embedder(Settings(), threads=1)
be = e._model if hasattr(e, "_model") else None
print(type(e).__name__, [a for a in vars(e)])
emb = [v for v in vars(e).values() if hasattr(v, "_forward")][0]
def fw(batch, width, n=40):
    ids = [[101] + [2000] * (width - 2) + [102]] * batch
    xs = []
    for _ in range(n):
        t0 = time.perf_counter(); emb._forward(ids, width); xs.append(time.perf_counter() - t0)
    return 1000 * float(np.median(xs))
for w in (3, 4, 8, 16, 32, 64):
    print(f"width {w}: b1 {fw(1,w):.2f}  b4 {fw(4,w):.2f}  b16 {fw(16,w):.2f} ms")
# alternating shapes
def alt(shapes, n=40):
    xs = []
    for _ in range(n):
        t0 = time.perf_counter()
        for b, w in shapes:
            emb._forward([[101] + [2000] * (w - 2) + [102]] * b, w)
        xs.append(time.perf_counter() - t0)
    return 1000 * float(np.median(xs)) / len(shapes)
print("alt same (1,4)x6: %.2f ms/call" % alt([(1, 4)] * 6))
print("alt 6 shapes: %.2f ms/call" % alt([(1, 3), (2, 4), (3, 5), (1, 6), (2, 7), (4, 8)]))
print("alt 12 shapes: %.2f ms/call" % alt([(b, w) for b in (1, 2, 3) for w in (3, 5, 7, 8)]))
print("alt 40 shapes: %.2f ms/call" % alt([(b, w) for b in (1, 2, 3, 4, 5) for w in (3, 4, 5, 6, 7, 8, 16, 24)]))
