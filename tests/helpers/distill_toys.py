"""run_distill tests' toys: a teacher directory written by hand (a tiny config, google-named
weights with a two-label classifier head, labels.txt: the toy task's labels, finetune_toys.KEY),
and the files a distillation test trains a teacher and its student from."""
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


def student_toy(tmp_path, data):
  """{data, config, config_file, vocab, tmp, teacher, out}: a 3-layer H=32 config and the test
  vocab written in tmp_path beside the task directory `data` (already written); the teacher and
  the student train into tmp_path/teacher and tmp_path/student."""
  config = mt.tiny_config(vocab_size=len(tokenizer_vocab.vocab_tokens()), hidden_size=32,
                          num_hidden_layers=3, intermediate_size=64, max_position_embeddings=32)
  config_file = tmp_path / "bert_config.json"
  config_file.write_text(config.to_json_string())
  return dict(data=str(data), config=config, config_file=str(config_file),
              vocab=tokenizer_vocab.write_vocab(tmp_path), tmp=tmp_path,
              teacher=str(tmp_path / "teacher"), out=str(tmp_path / "student"))
