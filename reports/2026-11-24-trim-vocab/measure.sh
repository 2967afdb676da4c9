#!/usr/bin/env bash
# Issue 23 measurement: full vs trimmed models, side by side, one process per (dataset, lang).
set -u
cd /work/main
D=/work/shared/data
OUT=/tmp/trim/runs
mkdir -p $OUT
for lang in de zh ja; do
  for ds in flores acl; do
    if [ $ds = flores ]; then dsargs="--dataset flores --flores-dir $D/flores200 --offset 500 --limit 40"; else dsargs="--dataset acl --acl-dir $D/acl6060 --limit 40"; fi
    echo "== $ds $lang $(date +%T)"
    .venv/bin/livetrans eval $dsargs --langs $lang --methods ar --betas 0.2 --mask-k 3 \
      --display-modes "" --compare-model trim-$lang=/tmp/trim/$lang.gguf \
      --compare-model trim-all=/tmp/trim/all.gguf --out $OUT/$ds-$lang 2>&1 | grep "^| $ds\|^| Dataset"
  done
done
echo "== bench $(date +%T)"
for m in full de all; do
  if [ $m = full ]; then margs=""; else margs="--model /tmp/trim/$m.gguf"; fi
  echo "-- bench $m"
  .venv/bin/livetrans bench $margs --repeats 3 2>&1 | tail -30
done
echo "== done $(date +%T)"
