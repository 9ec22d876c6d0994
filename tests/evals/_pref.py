import json, sys, re
import numpy as np
from streams.settings import Settings
from streams.factories import make_embedder, open_store
from workers.embedding import embed_queries
data = json.load(open(sys.argv[1]))
settings = Settings()
emb = make_embedder(settings)
store = open_store(settings, emb, uri=sys.argv[2])
kind = sys.argv[3] if len(sys.argv) > 3 else "preference"
out = []
for s in data:
    ns = s["sample_id"]
    rows = store.records.of_kind(ns, kind, "user")
    if not rows:
        continue
    texts = [r["search_text"] for r in rows]
    V = np.asarray(emb.embed(texts)); V /= np.linalg.norm(V, axis=1, keepdims=True)
    for q in s["qa"]:
        qv = np.asarray(embed_queries(emb, [q["question"]]))[0]; qv /= np.linalg.norm(qv)
        cos = V @ qv
        order = np.argsort(-cos)
        gold = set(q["evidence"])
        gi = [i for i, r in enumerate(rows) if gold & set(r["evidence"])]
        best = int(order[0])
        out.append((q["beam_type"], ns, float(cos[best]), best in gi, max((float(cos[i]) for i in gi), default=None), q["question"][:70], rows[best]["semantic_text"][:70]))
for o in sorted(out, key=lambda o: -o[2]):
    print(f"{o[0][:12]:12s} {o[1]:8s} top={o[2]:.3f} topIsGold={int(o[3])} gold={'' if o[4] is None else f'{o[4]:.3f}'} | {o[5]} || {o[6]}")
