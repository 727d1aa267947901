"""The optimizer vocabulary: the names every program's optimizer flag takes, and what each means.

run_pretraining's --optimizer_type (NVIDIA's flag) and the fine-tuning programs' --optimizer
(run_classifier, run_ner, run_squad, run_distill, compare_checkpoints) take the same names:

  adam    google-research/bert's AdamWeightDecayOptimizer, exactly (no bias correction; NVIDIA's
          --optimizer_type=adam); the default of every program
  adamw   the same with Adam's bias correction: torch.optim.AdamW's update, as transformers
          fine-tunes (an extra checkpointed step counter, `adam_step`)
  lamb    LAMB with Adam's bias correction and the layer-wise trust ratio (NVIDIA's default for
          pretraining with large batches)

All three: weight decay 0.01 except LayerNorm and biases, beta_1 0.9, beta_2 0.999, epsilon 1e-6
(optimizers.make_optimizer). `adamweightdecay`, the fine-tuning programs' earlier spelling of
adam, is still accepted everywhere (commands and the optimizer.json of earlier run directories):
`canonical` maps a spelling to its name. No TensorFlow here: flag tables import this module.
"""

ADAM, ADAMW, LAMB = "adam", "adamw", "lamb"
DEFAULT = ADAM
MEANINGS = {
    ADAM: "google's AdamWeightDecay (no bias correction)",
    ADAMW: "the same with Adam's bias correction (torch.optim.AdamW, as transformers fine-tunes)",
    LAMB: "NVIDIA's LAMB (layer-wise trust ratio, for large batches)",
}
ADAMWEIGHTDECAY = "adamweightdecay"  # the fine-tuning programs' --optimizer for adam, before
OTHER_SPELLINGS = {ADAMWEIGHTDECAY: ADAM}
ACCEPTED = tuple(MEANINGS) + tuple(OTHER_SPELLINGS)  # what a flag accepts (enum choices)
# the end of every training program's optimizer help (optimization/recorded.py does it)
RECORDED_HELP = "Recorded in --output_dir (optimizer.json): resuming with another one is refused."


def canonical(name):
  """The optimizer a spelling names: ADAM, ADAMW or LAMB.

  Args:
    name: str, one of ACCEPTED (adamweightdecay is adam).

  Returns:
    str, a key of MEANINGS.

  Raises:
    ValueError: an unknown name (one line, naming the accepted ones).
  """
  name = OTHER_SPELLINGS.get(name, name)
  if name not in MEANINGS:
    raise ValueError("unknown optimizer_type %r: expected one of %s" % (name, ", ".join(ACCEPTED)))
  return name


def flag_help(prefix=""):
  """The help text of an optimizer flag: prefix, then each name with its meaning."""
  described = "; ".join("%s: %s" % item for item in MEANINGS.items())
  return ("%s%s (%s: %s, the earlier name). All: weight decay 0.01 but LayerNorm and biases, "
          "clip 1.0." % (prefix, described, ADAMWEIGHTDECAY, ADAM))
