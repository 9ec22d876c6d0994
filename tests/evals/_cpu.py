import subprocess, sys, time, psutil, collections
cmd = sys.argv[1:]
p = subprocess.Popen(cmd, stdout=open("/tmp/s20/cpu-bench.out", "w"), stderr=subprocess.STDOUT)
root = psutil.Process(p.pid)
last = {}
def name(pr):
    try:
        c = pr.cmdline()
    except Exception:
        return "?"
    s = " ".join(c)
    for key in ("segmenter", "encoder", "indexer", "query", "gateway", "tansu", "redis", "weed", "bench"):
        if key in s:
            return key + ("-child" if "multiprocessing" in s or "spawn" in s else "")
    return s[:60]
t0 = time.time()
while p.poll() is None:
    time.sleep(10)
    tot = collections.Counter()
    try:
        procs = [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
        break
    for pr in procs:
        try:
            ct = pr.cpu_times(); v = ct.user + ct.system
        except Exception:
            continue
        d = v - last.get(pr.pid, 0.0); last[pr.pid] = v
        tot[name(pr)] += d
    print(f"{time.time()-t0:6.0f}s " + " ".join(f"{k}={v/10*100:.0f}%" for k, v in sorted(tot.items(), key=lambda kv: -kv[1]) if v > 0.05), flush=True)
