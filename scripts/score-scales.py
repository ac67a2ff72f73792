#!/usr/bin/env python3
"""Score parts of top-10 candidates for 40 known users, 40 fresh users and 40 known users with the counting
terms off, on a running hir demo: python3 scripts/score-scales.py URL WORLD_DIR (docs/serving.md, "Score scales")."""
import json, random, sys, time, requests
url = sys.argv[1]
world = sys.argv[2]
ents = [json.loads(l) for l in open(world + "/entities.jsonl")]
users = [e["id"] for e in ents if e["type"] == "user"]
ads = [e["id"] for e in ents if e["type"] == "ad"]
random.seed(1)
def pct(xs, p):
    xs = sorted(xs); return xs[min(len(xs)-1, int(p*len(xs)))]
for kind in ["known", "fresh", "known, prior and co-engagement off"]:
    parts = {"score": [], "similarity": [], "prior": [], "coengagement": []}
    top = []
    for i in range(40):
        body = {"k": 10, "explain": True}
        if kind == "fresh":
            now = int(time.time()*1000)
            body["user"] = {"type": "user", "id": f"fresh-{i}-{now}"}
            body["context_events"] = [{"dst": {"type": "ad", "id": random.choice(ads)}, "type": "click", "ts": now - 60000*j} for j in range(3)]
        else:
            body["user"] = {"type": "user", "id": random.choice(users)}
        if "off" in kind:
            body["prior_weight"] = 0; body["coengagement_weight"] = 0
        r = requests.post(url + "/v1/retrieve", json=body).json()
        for j, c in enumerate(r["candidates"]):
            parts["score"].append(c["score"])
            for k in ("similarity", "prior", "coengagement"):
                parts[k].append(c["parts"].get(k, 0))
            if j == 0: top.append(c["score"])
    print(f"{kind}: top-1 score p5 {pct(top,.05):.2f} p50 {pct(top,.5):.2f} p95 {pct(top,.95):.2f}")
    for k, xs in parts.items():
        print(f"  {k:13s} over the top 10: min {min(xs):.2f} p5 {pct(xs,.05):.2f} p50 {pct(xs,.5):.2f} p95 {pct(xs,.95):.2f} max {max(xs):.2f}")
