  torchrun \
    --nnodes $NUM_NODES  \
    --nproc_per_node 8 \
    --rdzv_id 101 \
    --rdzv_backend c10d \
    --rdzv_endpoint "$MASTER_ADDR:29500" \
    torchtitan/train.py \
    --job.config-file torchtitan/models/llama3/train_configs/llama3_8b.toml \
    --metrics.enable_wandb \
    --training.local_batch_size=2 \
    --training.compile \
    --model.converters="float8" \
    --float8.enable_fsdp_float8_all_gather \
    --float8.precompute_float8_dynamic_scale_for_fsdp \
    --float8.force_recompute_fp8_weight_in_bwd \
    --profiling.profile_freq 1000000
    --training.steps 2000
