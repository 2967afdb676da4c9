#!/bin/sh
# serve --langs en,de's copy (no corpus) against the full Gemma 3 270M, en->de AR finals
# (docs/trim-vocab.md, "Trimmed by default"). FLORES_DIR, ACL_DIR: the data folders.
# recipe-v1/: wordfreq words as listed; recipe-v2/: + German words with ß; top level:
# + every all-neutral token (RECIPE_VERSION 3 in app/vocab_trim/auto.py), and, on ACL, the
# copy with --corpus en=/de= ACL dev segments 101-468 (CORPUS_COPY).
set -e
python -c "from pathlib import Path; from app.model_files import default_model_path; \
from app.vocab_trim.auto import AutoTrim, served_model; \
print(served_model(default_model_path(), AutoTrim(langs=('en', 'de')), Path('/tmp/trimcache')))"
# COPY: the path it printed
tail -n +101 "$ACL_DIR/dev/en.txt" > /tmp/acl-en-101-468.txt
tail -n +101 "$ACL_DIR/dev/de.txt" > /tmp/acl-de-101-468.txt
python -c "from pathlib import Path; from app.model_files import default_model_path; \
from app.vocab_trim.auto import AutoTrim, served_model; \
print(served_model(default_model_path(), AutoTrim(langs=('en', 'de'), corpora=( \
('en', Path('/tmp/acl-en-101-468.txt')), ('de', Path('/tmp/acl-de-101-468.txt')))), \
Path('/tmp/trimcache')))"
# CORPUS_COPY: the path it printed
livetrans eval --dataset flores --flores-dir "$FLORES_DIR" --offset 500 --langs de \
    --limit 100 --lag 1000 --methods ar --betas "" --display-modes "" --n-threads 1 \
    --omp-wait-policy passive --compare-model auto="$COPY" --out flores100
livetrans eval --dataset acl --acl-dir "$ACL_DIR" --langs de --limit 100 --lag 1000 \
    --methods ar --betas "" --display-modes "" --n-threads 1 --omp-wait-policy passive \
    --compare-model auto="$COPY" --out acl100
livetrans eval --dataset acl --acl-dir "$ACL_DIR" --langs de --limit 100 --lag 1000 \
    --methods ar --betas "" --display-modes "" --n-threads 1 --omp-wait-policy passive \
    --compare-model auto="$COPY" --compare-model corpus="$CORPUS_COPY" --out acl100-corpus
# which tokens of the full model's finals each copy lacks
python missing_tokens.py.txt "$COPY" flores100/records.jsonl acl100/records.jsonl
python missing_tokens.py.txt "$CORPUS_COPY" acl100-corpus/records.jsonl
