import time, numpy as np
from streams.settings import Settings
from streams.factories import model_embedder
e = model_embedder(Settings(), threads=1)
inner = e
def t(texts, n=30):
    xs = []
    for _ in range(n):
        t0 = time.perf_counter(); e.embed(texts); xs.append(time.perf_counter() - t0)
    return 1000 * float(np.median(xs))
for label in (["Ana"], ["travel plans"], ["a somewhat longer label text here"]):
    print(label, "1 text: %.2f ms" % t(label))
print("32 same labels of 2 tokens: %.2f ms" % t(["travel plans"] * 32))
print("32 labels widths 1..8 mixed: %.2f ms" % t([" ".join(["word"] * (1 + i % 8)) for i in range(32)]))
s = "Ana: I went to the lake with my kids last weekend and we had a lovely picnic, the weather was great."
print("1 turn ~28 tok: %.2f ms" % t([s]))
print("16 turns same: %.2f ms" % t([s] * 16))
print("16 turns varied: %.2f ms" % t([s + " more" * i for i in range(16)]))
