"""Measurement beside the model: benchmarks over torch.distributed (`bench`), the emulated
cluster (`lab`), and fitting/validating the model against what was measured (`calibrate`)."""
