import asyncio, sys, time, pickle
from pathlib import Path
from streams.bench.harness import load_reported
from streams.factories import make_embedder
from streams.settings import Settings
from tests.evals.probe_figures import asked
from tests.evals.recall_probe import stored
from tests.evals.query_stages import serving, ask_all
import workers.query.service as svc
settings = Settings()
convs, _ = load_reported(Path(sys.argv[1]))
emb = make_embedder(settings)
store, _ = stored(convs, emb, Path(sys.argv[2]), settings)
service = serving(settings, emb, store)
qs = [(c.namespace, qa.question) for c in convs for qa in c.qa if asked(qa, None) is not None][: int(sys.argv[3])]
captured = []
orig = svc._selected
def wrapped(routes, *a, **kw):
    captured.append(routes)
    return orig(routes, *a, **kw)
svc._selected = wrapped
asyncio.run(ask_all(service, qs, 100, 1))
pickle.dump(captured, open(sys.argv[4], "wb"))
print(len(captured), "requests;", sum(len(r.candidates) for rs in captured for r in rs) / len(captured), "candidates a request;", sum(len(rs) for rs in captured) / len(captured), "routes")
