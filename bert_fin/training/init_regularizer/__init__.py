"""--init_regularizer: continued pretraining that holds the encoder near the checkpoint it started
from (L2 or EWC toward --init_checkpoint), against catastrophic forgetting.

  penalty      the penalty in the training graph: which variables, θ0 and F as local variables,
               its gradient and value (training/graph/step.py adds the gradient once an update)
  fisher_file  the Fisher directory: manifest, base-checkpoint fingerprint, atomic write, checks
  fisher       the Fisher estimate: squared gradients of the pretraining loss over record batches
               (tools/estimate_fisher.py)
"""
