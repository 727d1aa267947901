"""The optimizers and the learning-rate schedule: names (the optimizer vocabulary every program's
flag takes, no TensorFlow), schedule (warm-up and decay), optimizers (AdamWeightDecay, LAMB),
recorded (optimizer.json: which optimizer a run directory's checkpoints were trained with)."""
