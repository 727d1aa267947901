"""extract_features.py's settings table and flags (bert_fin/flag_table.py generates the flags).

Two origins (--help groups them):
  GOOGLE    google-research/bert extract_features.py, same names and defaults: input_file,
            output_file, layers, bert_config_file, max_seq_length, init_checkpoint, vocab_file,
            do_lower_case, batch_size, and the TPU flags use_tpu (refused), master, num_tpu_cores,
            use_one_hot_embeddings (accepted and ignored: on CPUs/GPUs the lookup is a gather);
  BERT_FIN  pooling and vectors_file (sentence vectors to .npy, with an ids file), progress.
--init_checkpoint may also name a transformers folder (config.json + model.safetensors /
pytorch_model.bin): imported for the run into a temporary directory (tools/import_hf.py keeps an
import), and then --bert_config_file / --vocab_file may be left out.
"""
import dataclasses
import typing


from bert_fin import flag_table
from bert_fin.flag_table import option
from bert_fin.finetune import settings as finetune_settings
from bert_fin.training import settings as train_settings

GOOGLE, BERT_FIN = train_settings.GOOGLE, train_settings.BERT_FIN
TITLES = {GOOGLE: "google-research/bert extract_features.py", BERT_FIN: "bert_fin"}
CLS, MEAN = "cls", "mean"
POOLINGS = (CLS, MEAN)


@dataclasses.dataclass(frozen=True)
class Data:
  """What is read and written, and how much at a time."""
  input_file: typing.Optional[str] = option(
      None, "One example a line: `text_a`, or `text_a ||| text_b` for a pair (google's format; "
      "a line with more than one ||| is refused).", origin=GOOGLE, required=True)
  output_file: typing.Optional[str] = option(
      None, "google's JSON lines: one line an example, every token's values of each of "
      "--layers. bert_fin: may be left out when --vectors_file is given.", origin=GOOGLE,
      required=True, unless="vectors_file")
  layers: str = option(
      "-1,-2,-3,-4", "The encoder layers to output, comma-separated (-1: the last).",
      origin=GOOGLE)
  max_seq_length: int = option(
      128, "The maximum total input sequence length after WordPiece tokenization. Sequences "
      "longer than this will be truncated, and sequences shorter than this will be padded.",
      origin=GOOGLE, at_least=3)  # [CLS] text [SEP]
  batch_size: int = option(32, "Batch size for predictions.", origin=GOOGLE, at_least=1)


@dataclasses.dataclass(frozen=True)
class Model:
  """The model: config, weights, vocabulary, casing."""
  bert_config_file: typing.Optional[str] = option(
      None, "The config json file corresponding to the pre-trained BERT model.", origin=GOOGLE,
      required=True, unless=train_settings.from_transformers_folder)
  init_checkpoint: typing.Optional[str] = option(
      None, "Initial checkpoint (usually from a pre-trained BERT model). bert_fin: also a "
      "transformers folder (imported for the run).", origin=GOOGLE, required=True)
  vocab_file: typing.Optional[str] = option(
      None, "The vocabulary file that the BERT model was trained on.", origin=GOOGLE,
      required=True, unless=train_settings.from_transformers_folder)
  do_lower_case: bool = option(
      True, "Whether to lower case the input text. Should be True for uncased models and False "
      "for cased models.", origin=GOOGLE)


def _tpu_option(name):
  """run_pretraining's TPU flag `name` (training/settings.py: the same default and help)."""
  return flag_table.option_of(train_settings.Tpu, name, origin=GOOGLE)


@dataclasses.dataclass(frozen=True)
class Tpu:
  """google's TPU flags: accepted so google command lines parse; --use_tpu is refused."""
  use_tpu: bool = _tpu_option("use_tpu")
  master: typing.Optional[str] = _tpu_option("master")
  num_tpu_cores: int = _tpu_option("num_tpu_cores")
  use_one_hot_embeddings: bool = option(
      False, "TPU only; accepted and ignored (the lookup is a gather).", origin=GOOGLE)


@dataclasses.dataclass(frozen=True)
class Vectors:
  """Sentence vectors: one float32 row an example, written to .npy."""
  vectors_file: typing.Optional[str] = option(
      None, "Write sentence vectors here (.npy, float32 [examples, hidden x number of --layers]: "
      "each layer's vector, concatenated in --layers order), and beside it PATH.ids.tsv: one "
      "line an example, in input order: its line index (google's linex_index), a tab, the input "
      "line.", origin=BERT_FIN)
  pooling: str = option(
      CLS, "The sentence vector of a layer: cls = its [CLS] token's vector; mean = the mean "
      "over the example's real tokens ([CLS] and [SEP] included, padding never).", POOLINGS,
      origin=BERT_FIN)
  progress: bool = option(
      True, "A progress bar over the input's bytes (rate, ETA) on stderr.", origin=BERT_FIN)


@dataclasses.dataclass(frozen=True)
class Settings:
  """Every extract_features setting, by concern."""
  data: Data = dataclasses.field(default_factory=Data)
  model: Model = dataclasses.field(default_factory=Model)
  vectors: Vectors = dataclasses.field(default_factory=Vectors)
  tpu: Tpu = dataclasses.field(default_factory=Tpu)
  given: typing.FrozenSet[str] = frozenset()  # the flags given on the command line (not a flag)


# every flag of the table on absl's FLAGS (or a fresh FlagValues); --help: google's, bert_fin's
define_flags, flag_groups = flag_table.program_flags(Settings, TITLES)


def parse_layers(text):
  """[int] of --layers ("-1,-2"); ValueError naming the flag for a value that is not a list of
  integers."""
  try:
    layers = [int(part) for part in text.split(",")]
  except ValueError:
    raise ValueError("--layers=%s: comma-separated layer indexes (e.g. -1,-2,-3,-4)"
                     % text) from None
  return layers


def check_layers(layers, num_hidden_layers, text):
  """ValueError naming --layers when an index is outside [-L, L) of a model of L layers."""
  wrong = [layer for layer in layers if not -num_hidden_layers <= layer < num_hidden_layers]
  if wrong:
    raise ValueError("--layers=%s: the model has %d layers (indexes %d..%d), not %s" % (
        text, num_hidden_layers, -num_hidden_layers, num_hidden_layers - 1,
        ", ".join(map(str, wrong))))


def settings_of(flag_values):
  """The checked, frozen Settings of parsed flags; ValueError (one line) naming the flag."""
  settings = finetune_settings.from_flags(Settings, flag_values)
  data, vectors = settings.data, settings.vectors
  flag_table.check_fields(settings)  # --use_tpu, the required flags, --max_seq_length >= 3, ...
  if "pooling" in settings.given and not vectors.vectors_file:
    raise ValueError("--pooling makes sentence vectors: pass --vectors_file=PATH.npy")
  if vectors.vectors_file and not vectors.vectors_file.endswith(".npy"):
    raise ValueError("--vectors_file %s: a .npy file name (numpy's format)" % vectors.vectors_file)
  parse_layers(data.layers)
  return settings
