#!/usr/bin/env bash
# The README's faithfulness table: every attribution method on each demo model in assets/models over
# COUNT held-out glyph images (seeds from 10^12, never trained on), with `attnscope eval --images`.
# CAMs and attention at the last block; deletion curves of the labelled class, blurred replacement.
# Usage: scripts/faithfulness_table.sh [COUNT] [ATTNSCOPE]   (prints Markdown; eval.json per model in
# $OUT, default /tmp/attnscope-faithfulness)
set -euo pipefail
cd "$(dirname "$0")/.."
count="${1:-100}"
attnscope="${2:-build/attnscope}"
out="${OUT:-/tmp/attnscope-faithfulness}"
rm -rf "$out"
"$attnscope" glyphs --out "$out/images" --count "$count" --seed 1000000000000 > /dev/null
for model in assets/models/*.safetensors; do
  name=$(basename "$model" .safetensors)
  "$attnscope" eval --images "$out/images" --boxes "$out/images/labels.csv" --labels "$out/images/labels.csv" \
    --model "$model" --methods all --layers -1 --steps 20 --out "$out/$name" > "$out/$name.txt" 2> /dev/null
done
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
models = sorted(d for d in os.listdir(out) if os.path.exists(os.path.join(out, d, "eval.json")))
reports = {m: json.load(open(os.path.join(out, m, "eval.json"))) for m in models}
methods = [r["method"] for r in reports[models[0]]["methods"]]
def cell(model, method, key):
    for r in reports[model]["methods"]:
        if r["method"] == method:
            return "" if r[key] is None else f"{r[key]:.3f}"
    return ""
for key, title in (("deletion_auc", "deletion AUC (lower: the map found what the model uses)"),
                   ("pointing", "pointing game"), ("mass_inside", "mass inside the object")):
    print(f"\n{title}, {reports[models[0]]['images']} held-out images\n")
    print("| method | " + " | ".join(models) + " |")
    print("|---" * (len(models) + 1) + "|")
    for method in methods:
        if key == "pointing" and method == "random":
            continue
        print(f"| {method} | " + " | ".join(cell(m, method, key) for m in models) + " |")
print("\n| accuracy | " + " | ".join(f"{reports[m].get('accuracy', 0):.3f}" for m in models) + " |")
PY
