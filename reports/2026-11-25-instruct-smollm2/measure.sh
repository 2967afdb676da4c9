GGUF=$(.venv/bin/python -c "from app.model_files import smollm2_model_path; print(smollm2_model_path())")
.venv/bin/livetrans eval --dataset flores --flores-dir ../shared/data/flores200 --langs de --limit 10 --lag 6 --model "$GGUF" --n-threads 1 --display-modes mask-k --methods ar,ar+noclean --betas 0.2 --out results/flores_smollm
.venv/bin/livetrans eval --dataset acl --acl-dir ../shared/data/acl6060 --langs de --limit 10 --lag 6 --model "$GGUF" --n-threads 1 --display-modes mask-k --methods ar,ar+noclean --betas 0.2 --out results/acl_smollm
.venv/bin/livetrans eval --dataset flores --flores-dir ../shared/data/flores200 --langs de --limit 10 --lag 6 --model "$GGUF" --n-threads 1 --display-modes mask-k --prompt-format chat-generic --methods ar,ar+noclean --betas '' --out results/flores_generic
.venv/bin/livetrans eval --dataset acl --acl-dir ../shared/data/acl6060 --langs de --limit 10 --lag 6 --model "$GGUF" --n-threads 1 --display-modes mask-k --prompt-format chat-generic --methods ar,ar+noclean,ssbd-b0.2+noclean --betas 0.2 --out results/acl_generic
python -m eval.framing_counts results/flores_smollm results/acl_smollm results/flores_generic results/acl_generic
