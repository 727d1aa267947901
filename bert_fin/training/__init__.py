"""Batches -> optimizer steps: flags, Horovod, loss scaling, accumulation, model_fn, logging hooks."""
