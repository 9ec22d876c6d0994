import asyncio, cProfile, pstats, sys, time
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
prof = cProfile.Profile()
orig = svc._selected
spent = [0.0]
def wrapped(*a, **kw):
    t0 = time.perf_counter()
    prof.enable()
    try:
        return orig(*a, **kw)
    finally:
        prof.disable()
        spent[0] += time.perf_counter() - t0
svc._selected = wrapped
asyncio.run(ask_all(service, qs[:20], 100, 1))
prof = cProfile.Profile(); spent[0] = 0.0
asyncio.run(ask_all(service, qs, 100, 1))
print("selection ms/question", 1000 * spent[0] / len(qs))
st = pstats.Stats(prof); st.sort_stats("tottime").print_callers("method .items. of .dict")
