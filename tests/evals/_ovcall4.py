import time, sys, numpy as np
from streams.settings import Settings
from streams.factories import model_embedder
from workers.embedding.openvino import openvino_module
e = model_embedder(Settings(), threads=1)
path = str(e.inner.onnx_path)
ov = openvino_module()
core = ov.Core()
def compiled(extra, reshape=None):
    m = core.read_model(path)
    if reshape:
        m.reshape({i.get_any_name(): ov.PartialShape(reshape) for i in m.inputs})
    cfg = {"INFERENCE_PRECISION_HINT": "bf16", "PERFORMANCE_HINT": "LATENCY", "NUM_STREAMS": 1, "INFERENCE_NUM_THREADS": 1}
    cfg.update(extra)
    return core.compile_model(m, "CPU", cfg)
def feed(b, w):
    ids = np.array([[101] + [2000] * (w - 2) + [102]] * b, dtype=np.int64)
    return {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
shapes = [(1, 3), (2, 4), (3, 5), (1, 6), (2, 7), (4, 8)]
feeds = {s: feed(*s) for s in shapes}
def go(comp, n=60):
    req = comp.create_infer_request()
    xs = []
    for _ in range(n):
        t0 = time.perf_counter()
        for s in shapes:
            req.infer(feeds[s])
        xs.append(time.perf_counter() - t0)
    alone = []
    for s in shapes:
        ys = []
        for _ in range(30):
            t0 = time.perf_counter(); req.infer(feeds[s]); ys.append(time.perf_counter() - t0)
        alone.append(np.median(ys))
    return "alternating %.2f ms/call, alone avg %.2f" % (1000 * float(np.median(xs)) / len(shapes), 1000 * float(np.mean(alone)))
#print("default", go(compiled({})))
#print("cache 0", go(compiled({"CPU_RUNTIME_CACHE_CAPACITY": 0})))
#print("bounded [1..64,1..256]", go(compiled({}, ov.PartialShape([ov.Dimension(1, 64), ov.Dimension(1, 256)]) if False else None)))
m = core.read_model(path)
print([ (i.get_any_name(), i.get_partial_shape()) for i in m.inputs])
#print("bounded", go(compiled({}, [ov.Dimension(1, 64), ov.Dimension(1, 256)])))
#print("hint THROUGHPUT", go(compiled({"PERFORMANCE_HINT": "THROUGHPUT"})))
c = compiled({})
for name, sh in (("batch only w8", [(1, 8), (2, 8), (3, 8), (4, 8), (2, 8), (1, 8)]), ("width only b1", [(1, 3), (1, 4), (1, 5), (1, 6), (1, 7), (1, 8)]), ("width only b4", [(4, 3), (4, 4), (4, 5), (4, 6), (4, 7), (4, 8)])):
    shapes[:] = sh
    feeds.update({s: feed(*s) for s in sh})
    print(name, go(c))
