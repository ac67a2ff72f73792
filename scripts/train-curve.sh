#!/usr/bin/env bash
# train-curve.sh: quality against training time. Trains our model on a
# validation window with a snapshot every EVERY steps, scores every
# snapshot with the embeddings alone (prior and co-engagement off), and
# writes a TSV table and a PNG (tools/curve) of recall@20 against the
# training wall time, with the popularity and recent-popularity baselines
# of the same window as reference lines.
#
#   DATA=../shared/data/movielens-100k STEPS=240 EVERY=40 SERIES=defaults \
#     OUT=docs/curve bash scripts/train-curve.sh [extra hir eval flags]
#
# Several series go into one TSV: run it again with another SERIES and the
# same OUT (rows are appended; delete OUT.tsv to start over).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${DATA:-../shared/data/movielens-100k}
STEPS=${STEPS:-240}
EVERY=${EVERY:-40}
SERIES=${SERIES:-defaults}
OUT=${OUT:-docs/curve}
export GOMLX_BACKEND=${GOMLX_BACKEND:-go} GOMLX_NO_AUTO_INSTALL=1

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/hir" ./cmd/hir
score=(--protocol chrono --window validation --methods ours --prior-weight 0 --coengage-weight 0)
"$work/hir" eval --data "$DATA" "${score[@]}" --steps "$STEPS" --snapshot-every "$EVERY" \
  --model-dir "$work/m" "$@" >"$work/train.log" 2>&1 || { tail -20 "$work/train.log"; exit 1; }

[[ -f "$OUT.tsv" ]] || printf 'series\tsteps\tseconds\tanchors_per_s\trecall@20\tndcg@20\tcold_recall@20\n' >"$OUT.tsv"
for v in $(ls "$work/m/models" | grep '^v[0-9]*$' | sort -V); do
  "$work/hir" eval --data "$DATA" "${score[@]}" --model "$work/m/models/$v" --json "$work/$v.json" >/dev/null 2>&1
  python3 - "$SERIES" "$work/m/models/$v/metrics.json" "$work/$v.json" >>"$OUT.tsv" <<'PY'
import json, sys
series, metrics, report = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
row = {r["slice"]: r["metrics"] for r in report["results"] if r["method"] == "ours-dense"}
print("\t".join([series, str(metrics["steps"]), "%.1f" % metrics["seconds"], "%.1f" % metrics["anchors_per_s"],
                 "%.4f" % row["all"]["recall@20"], "%.4f" % row["all"]["ndcg@20"], "%.4f" % row["cold_users"]["recall@20"]]))
PY
done
"$work/hir" eval --data "$DATA" --protocol chrono --window validation --methods popularity,recent-popularity --json "$work/base.json" >/dev/null 2>&1
mapfile -t refs < <(python3 - "$work/base.json" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    if r["slice"] == "all":
        print("-ref=%s=%.4f" % (r["method"], r["metrics"]["recall@20"]))
PY
)
(cd tools/curve && go run . -in "../../$OUT.tsv" -out "../../$OUT.png" "${refs[@]}")
column -t -s $'\t' "$OUT.tsv"
echo "wrote $OUT.tsv and $OUT.png"
