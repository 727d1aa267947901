"""A teacher directory for run_distill tests, written by hand: a tiny config, google-named
weights with a two-label classifier head, labels.txt (the toy task's labels: finetune_toys.KEY)."""
import numpy as np

from helpers.google_checkpoints import write_google_checkpoint
from helpers import modeling_toys as mt
from helpers import tokenizer_vocab

HIDDEN = 16


def write_teacher(tmp_path, num_hidden_layers):
  """Writes tmp_path/bert_config.json (H=16, num_hidden_layers layers, the test vocab's size)
  and tmp_path/teacher/ (model.ckpt-5 with the head, labels.txt); returns (config file,
  teacher directory) as str."""
  config = mt.tiny_config(vocab_size=len(tokenizer_vocab.vocab_tokens()), hidden_size=HIDDEN,
                          num_hidden_layers=num_hidden_layers, num_attention_heads=2,
                          intermediate_size=32, max_position_embeddings=16)
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(config.to_json_string())
  teacher = tmp_path / "teacher"
  shapes = dict(mt.google_variable_shapes(config), output_weights=[2, HIDDEN],
                output_bias=[2])
  write_google_checkpoint(str(teacher / "model.ckpt-5"), shapes, np.random.RandomState(1))
  (teacher / "labels.txt").write_text("down\nup\n")
  return str(config_file), str(teacher)
