"""google's two random rules of pretraining data, stated once for every implementation of them.

  masked LM      each token chosen for a prediction independently: MASK_PERCENT% becomes [MASK],
                 KEEP_PERCENT% stays itself, RANDOM_PERCENT% becomes a random id (80/10/10)
  next sentence  segment B is drawn from another document with RANDOM_NEXT_PERCENT% probability
                 (else it is the actual continuation), when the chunk has 2 sentences or more

The implementations read the thresholds below, derived from the percentages (exactly: Python's
division rounds correctly, so MASK_BELOW is the double 0.8 google's `< 0.8` compares with):

  masking.mask_tokens and the C kernel (_kernel.c, given them by kernel_dispatch): one uniform
    draw in [0, 1): below MASK_BELOW [MASK]; from RANDOM_FROM a random id, random_ids[floor(
    (draw - RANDOM_FROM) * RANDOM_SCALE * len(random_ids))]; in between kept;
  faithful.py (google's own form): draw < MASK_BELOW -> [MASK], else a second draw <
    KEEP_OF_THE_REST -> kept, else a random vocabulary word;
  input/dynamic_masking.py: a uint32 word compared with uint32_threshold(MASK_BELOW / RANDOM_FROM);
  instances.py, faithful.py and the C kernel: a draw < RANDOM_NEXT_BELOW makes B a random next.

Changing a percentage changes every implementation together; tests/test_kernel.py checks that C
and Python still write the same bytes with other rules.
"""
MASK_PERCENT = 80
KEEP_PERCENT = 10
RANDOM_PERCENT = 10
RANDOM_NEXT_PERCENT = 50

MASK_BELOW = MASK_PERCENT / 100
RANDOM_FROM = (MASK_PERCENT + KEEP_PERCENT) / 100
RANDOM_SCALE = 100 / RANDOM_PERCENT
KEEP_OF_THE_REST = KEEP_PERCENT / (100 - MASK_PERCENT)
RANDOM_NEXT_BELOW = RANDOM_NEXT_PERCENT / 100


def uint32_threshold(probability):
  """The uint32 draw below which an event of `probability` happens: int(probability * 2**32)."""
  return int(probability * (1 << 32))


def kernel_parameters():
  """The thresholds the C kernel's make_block takes after short_seq_prob.

  Read now, so the kernel follows this module's current values.

  Returns:
    (random_next_below, mask_below, random_from, random_scale).
  """
  return RANDOM_NEXT_BELOW, MASK_BELOW, RANDOM_FROM, RANDOM_SCALE
