import time, numpy as np
from streams.settings import Settings
from streams.factories import model_embedder
e = model_embedder(Settings(), threads=1)
emb = e.inner
run = emb._run
runner = run.__self__ if hasattr(run, "__self__") else None
print(type(emb).__name__, type(run))
from workers.embedding.openvino import Bf16Runner
r = [v for v in vars(emb).values() if isinstance(v, Bf16Runner)]
r = r[0] if r else runner
comp = r._compiled
reqs = {}
def feed(b, w):
    ids = np.array([[101] + [2000] * (w - 2) + [102]] * b, dtype=np.int64)
    return {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
shapes = [(1, 3), (2, 4), (3, 5), (1, 6), (2, 7), (4, 8)]
feeds = {s: feed(*s) for s in shapes}
one = comp.create_infer_request()
def go(per_shape, n=60):
    xs = []
    for _ in range(n):
        t0 = time.perf_counter()
        for s in shapes:
            req = reqs.setdefault(s, comp.create_infer_request()) if per_shape else one
            req.infer(feeds[s])
        xs.append(time.perf_counter() - t0)
    return 1000 * float(np.median(xs)) / len(shapes)
def same(s, n=60):
    xs = []
    for _ in range(n):
        t0 = time.perf_counter(); one.infer(feeds[s]); xs.append(time.perf_counter() - t0)
    return 1000 * float(np.median(xs))
print("each shape alone:", ["%.2f" % same(s) for s in shapes])
print("one request alternating: %.2f ms/call" % go(False))
print("request per shape alternating: %.2f ms/call" % go(True))
print("one request alternating: %.2f ms/call" % go(False))
print("request per shape alternating: %.2f ms/call" % go(True))
