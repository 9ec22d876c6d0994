import json, sys
rows = json.load(open(sys.argv[1]))
data = {s["sample_id"]: s for s in json.load(open(sys.argv[2]))}
print(rows[0].keys())
n = 0
for r in rows:
    ids = [t for it in r["items"][:10] for t in it.get("turn_ids", [])]
    if any(g in ids for g in r["gold"]):
        continue
    n += 1
    print("=" * 100)
    print(n, r["namespace"], r.get("type") or r["category"], "|", r["question"])
    print("  gold:", r["gold"], "queries:", r["plan"]["semantic_queries"])
    s = data[r["namespace"]]
    conv = s["conversation"]
    for g in r["gold"]:
        d = g.split(":")[0][1:]
        for t in conv.get(f"session_{d}", []):
            if t["dia_id"] == g:
                print("   GOLD", g, t["speaker"], ":", t["text"][:300].replace("\n", " "))
    for i, it in enumerate(r["items"][:10]):
        print("   ", i, it["kind"], it.get("turn_ids", [])[:6], it["text"][:140].replace("\n", " "))
print(n)
