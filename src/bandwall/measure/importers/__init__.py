"""Readers for other tools' output (nccl-tests logs into the results store, training logs
for doctor and calibrate). Nothing is imported here: doctor reads a training log without
loading the store or the model."""
