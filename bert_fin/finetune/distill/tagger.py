"""run_distill with a run_ner teacher: its emission scores (the per-token logits its CRF or
softmax reads) distilled into a tagger student that keeps the teacher's CRF, in run_ner's
Estimator style. orchestration.py hands a --teacher_dir whose checkpoint has the tagger head
(finetuned.head_kind) to preflight() here, and this module's Plan to run().

`preflight(settings, dist, checkpoint)` reads and checks, before anything is written (one-line
ValueErrors): --task_name one of run_ner's formats (auto, chars, cluener); no flag that only a
classifier reads (--pooling, --entity_markers, the long-text flags); the teacher's labels.txt
(its tag list, the tagger head's rows) and --labels, when given, equal to it;
--bert_config_file of the teacher checkpoint's depth; the student (student.resolve); the data
(run_ner's preflight with the teacher's tags and --use_crf; --unlabeled_file's texts cut into
units and windows as run_ner reads an untagged CLUENER text, unlabeled.py, and mixed into the
training windows); when resuming, distill.json and the stored emissions' fingerprint.
`run(plan, dist)` then:
  student   the chief writes bert_config.json, vocab.txt and student_init/ (the teacher's
            layers, its embeddings, tagger head and CRF transitions) into --output_dir, once;
  teacher   with alpha > 0, the teacher's emission scores of every training window (the
            texts' too), float32 [windows, max_seq_length, tags] (4 bytes each: 500 windows x
            64 x 7 tags = 0.9 MB), read from teacher_logits.npz or computed once and stored
            there; with --ensemble_dirs each tagger's, stored as one array whose soft targets
            are their mean (teachers.py);
  train     every rank: run_ner's tagger on the student config, loss alpha x T^2 x KL of the
            emissions at the label positions (each unit's first piece: the positions run_ner's
            loss and CRF read; [CLS], [SEP], `##` pieces and padding count for nothing) + (1 -
            alpha) x run_ner's gold loss (the CRF's negative log-likelihood: the transitions
            learn from the gold labels alone) over the labelled windows' units only (a text's
            window has the soft term alone); alpha = 0 is run_ner's training itself;
  eval, predict  rank 0, run_ner's (eval_results.txt, test_predictions.txt, test_results.txt).
The --output_dir is then a fine-tuned run_ner directory of the student (labels.txt beside the
checkpoints): run_ner --do_predict and tools/export_hf.py read it with
--bert_config_file=OUTPUT_DIR/bert_config.json.
"""
import collections
import dataclasses

import tensorflow.compat.v1 as tf

from bert_fin import tokenization
from bert_fin.finetune import batches
from bert_fin.finetune import estimator_skeleton
from bert_fin.finetune import finetuned
from bert_fin.finetune import settings as finetune_settings
from bert_fin.finetune.classify import flags as classify_flags
from bert_fin.finetune.distill import matching as matching_lib
from bert_fin.finetune.distill import model as distill_model
from bert_fin.finetune.distill import soft_targets
from bert_fin.finetune.distill import student as student_lib
from bert_fin.finetune.distill import teachers as teachers_lib
from bert_fin.finetune.distill import unlabeled
from bert_fin.finetune.ner import data as ner_data
from bert_fin.finetune.ner import features as ner_features
from bert_fin.finetune.ner import flags as ner_flags
from bert_fin.finetune.ner import model as ner_model
from bert_fin.finetune.ner import orchestration as ner_run

Plan = collections.namedtuple("Plan", [
    "settings", "ner", "teacher_checkpoint", "teacher_config", "layer_map", "train_arrays",
    "mixed", "fingerprint", "stored_logits", "matching", "ensemble"])
Plan.__doc__ = """settings: run_distill's settings (for settings.distill); ner: run_ner's Plan of
the student (its settings: --init_checkpoint the student's first weights, None: random; its
bert_config, tags, data, use_crf: the teacher's); teacher_checkpoint, teacher_config: the
teacher's; layer_map: the teacher layers the student starts from, None when it does not;
train_arrays: the windows training reads (run_ner's; with --unlabeled_file those and the texts'
windows, model.LABELLED telling them apart, in a seeded order: unlabeled.gather of mixed);
mixed: unlabeled.Mixed (the distinct windows the teacher reads, their order), None without
--unlabeled_file; fingerprint: soft_targets.fingerprint of teacher and windows
(unlabeled.teacher_rows; None with alpha = 0); stored_logits: float32 [d, S, tags] of those d
windows, read from --output_dir (a resumed run), else None;
matching: matching.Matching (the teacher's encoder in the student's step) or None; ensemble:
[(checkpoint, use_crf)] of --ensemble_dirs' taggers (their emissions averaged with the
teacher's at --temperature), [] for none."""

# run_distill's flags that only a classifier reads: refused with a tagger teacher
CLASSIFIER_ONLY = tuple(sorted(
    ({field.name for field in dataclasses.fields(classify_flags.Task)}
     - {field.name for field in dataclasses.fields(ner_flags.Task)})
    | {field.name for field in dataclasses.fields(classify_flags.Documents)}))


def _say(dist, line):
  if dist.is_chief:
    print("[run_distill] " + line, flush=True)


def check_task(settings, kind):
  """ValueError (one line) when --task_name is the other head's data format: run_ner's (auto,
  chars, cluener) for a tagger teacher, run_classifier's for a classifier (kind:
  finetuned.head_kind's)."""
  task_name = settings.task.task_name
  tagger_format = task_name in ner_data.FORMATS
  if (kind == finetuned.TAGGER) != tagger_format:
    raise ValueError("--task_name=%s is a %s data format, the teacher in %s is a %s: pass one of "
                     "%s" % (task_name, "run_ner" if tagger_format else "run_classifier",
                             settings.distill.teacher_dir,
                             "run_ner tagger" if kind == finetuned.TAGGER else "classifier",
                             ", ".join(ner_data.FORMATS) if kind == finetuned.TAGGER else
                             "run_classifier's (jsonl, tsv, ...)"))


def _check_flags(settings, labels):
  """ValueError naming a flag a tagger teacher does not take, or --labels not its tags."""
  distill = settings.distill
  given = sorted(name for name in CLASSIFIER_ONLY if name in settings.given)
  if given:
    raise ValueError("--%s: a classifier's flag, the teacher in %s is a run_ner tagger: drop it"
                     % (given[0], distill.teacher_dir))
  if settings.task.labels and list(settings.task.labels) != labels:
    raise ValueError("--labels %s: the teacher's tags (%s/labels.txt) are %s: drop the flag" % (
        ",".join(settings.task.labels), distill.teacher_dir, ",".join(labels)))


def _ner_settings(settings, labels, use_crf, bert_config_file, init_checkpoint):
  """run_ner's Settings of run_distill's: the shared concerns, the teacher's tags and CRF, the
  given config file and first weights."""
  shared = {field.name: getattr(settings, field.name)
            for field in dataclasses.fields(finetune_settings.Settings)}
  shared["model"] = dataclasses.replace(settings.model, bert_config_file=bert_config_file,
                                        init_checkpoint=init_checkpoint)
  return ner_flags.Settings(**shared, task=ner_flags.Task(settings.task.task_name, labels,
                                                          use_crf))


def preflight(settings, dist, checkpoint):
  """Everything read and checked before anything is written (checkpoint: the teacher's, with a
  tagger head); returns a Plan."""
  distill, output_dir = settings.distill, settings.output.output_dir
  check_task(settings, finetuned.TAGGER)
  labels = finetuned.read_labels(distill.teacher_dir)
  if not labels:
    raise ValueError("--teacher_dir %s has no labels.txt (the tag list of its tagger head): not "
                     "a run_ner --output_dir" % distill.teacher_dir)
  _check_flags(settings, labels)
  if ner_model.head_size(checkpoint) != len(labels):
    raise ValueError("--teacher_dir %s: %s has a tagger head for %d tags, its labels.txt lists "
                     "%d: restore the labels.txt of this fine-tuning" % (
                         distill.teacher_dir, checkpoint, ner_model.head_size(checkpoint),
                         len(labels)))
  max_seq_length = settings.data.max_seq_length
  teacher_config = student_lib.teacher_config(settings.model.bert_config_file, max_seq_length,
                                              checkpoint)
  members = [(member, ner_model.has_crf(member)) for member in teachers_lib.members(
      distill.ensemble_dirs, distill.teacher_dir, checkpoint, finetuned.TAGGER, labels)]
  config, layer_map = student_lib.resolve(distill, teacher_config, max_seq_length)
  matching = matching_lib.plan(distill, teacher_config, config, layer_map, checkpoint)
  student_lib.check_record(output_dir, student_lib.record(settings, layer_map))
  use_crf = ner_model.has_crf(checkpoint)
  plan = ner_run.preflight(_ner_settings(settings, labels, use_crf,
                                         settings.model.bert_config_file, checkpoint), dist)
  init = student_lib.init_checkpoint(settings, layer_map)
  student_settings = dataclasses.replace(plan.settings, model=dataclasses.replace(
      plan.settings.model, init_checkpoint=init))
  _say(dist, "student: %d layers, hidden %d%s, %s; teacher: %d layers (%s)" % (
      config.num_hidden_layers, config.hidden_size,
      " from teacher layers %s" % ",".join(map(str, layer_map)) if layer_map is not None else
      " from %s" % init if init else " random init", "CRF" if use_crf else "softmax",
      teacher_config.num_hidden_layers, checkpoint))
  arrays, mixed = plan.encoded["train"].arrays, None
  if distill.unlabeled_file:
    mixed = _with_unlabeled(arrays, settings, labels, dist)
    arrays = unlabeled.gather(mixed)
    num_train_steps, num_warmup_steps = unlabeled.train_steps(settings, mixed, dist, "windows")
    plan = plan._replace(num_train_steps=num_train_steps, num_warmup_steps=num_warmup_steps)
  print_, stored = None, None
  if distill.alpha > 0:
    rows, covered = unlabeled.teacher_rows(arrays, mixed)
    print_ = soft_targets.fingerprint(checkpoint, teacher_config.to_json_string(), covered,
                                      [member for member, _ in members], distill.temperature)
    stored = soft_targets.read(output_dir, print_, [batches.num_rows(rows), max_seq_length,
                                                    len(labels)])
  return Plan(settings, plan._replace(settings=student_settings, bert_config=config),
              checkpoint, teacher_config, layer_map, arrays, mixed, print_, stored, matching,
              members)


def _with_unlabeled(arrays, settings, labels, dist):
  """unlabeled.Mixed of the training windows and --unlabeled_file's (each text cut into units
  and windowed as run_ner reads an untagged text: tag ids 0, never read), with model.LABELLED
  1 / 0, in unlabeled.row_order (seeded; --unlabeled_weight: the texts' share over the whole
  run)."""
  texts = unlabeled.read(settings.distill.unlabeled_file)
  _say(dist, unlabeled.describe(texts))
  tokenizer = tokenization.make_tokenizer(settings.model.vocab_file,
                                         do_lower_case=settings.model.do_lower_case)
  extra = ner_features.encode(unlabeled.sentences(texts), labels, tokenizer,
                              settings.data.max_seq_length)
  _say(dist, "%s: %d texts -> %d windows" % (texts.path, len(texts.examples),
                                             len(extra.windows)))
  return unlabeled.mix_for_run(arrays, extra.arrays, settings, dist, distill_model.LABELLED,
                               lambda line: _say(dist, line))


def _teacher_logits(plan, dist):
  """float32 [d, S, tags]: the teacher's emission scores of the distinct windows it reads
  (unlabeled.teacher_rows), stored, or computed once a window (the chief stores them; every rank
  computes its own when none are stored)."""
  teachers = [(distill_model.teacher_tagger_model_fn(plan.teacher_config, len(plan.ner.labels),
                                                     use_crf), checkpoint)
              for checkpoint, use_crf in [(plan.teacher_checkpoint, plan.ner.use_crf)]
              + plan.ensemble]
  return soft_targets.stored_or_computed(
      plan.stored_logits, teachers, lambda each: teachers_lib.mean_at_temperature(
          each, plan.settings.distill.temperature),
      unlabeled.teacher_rows(plan.train_arrays, plan.mixed)[0], plan.ner.settings, dist,
      plan.fingerprint, lambda line: _say(dist, line), ("emissions", "windows"))


def run(plan, dist):
  """Trains the tagger student (every rank), then the chief evaluates dev and predicts test as
  run_ner does. Returns the eval result dict, or None (no --do_eval, or not the chief)."""
  settings, ner, distill = plan.ner.settings, plan.ner, plan.settings.distill
  output_dir = settings.output.output_dir
  tf.logging.set_verbosity(tf.logging.INFO)
  if dist.is_chief:
    tf.io.gfile.makedirs(output_dir)
    student_lib.write_files(output_dir, ner.bert_config, settings.model.vocab_file,
                            plan.layer_map, plan.teacher_checkpoint)
  arrays = dict(plan.train_arrays)
  if distill.alpha > 0:
    arrays = unlabeled.with_teacher_logits(arrays, plan.mixed, distill_model.TEACHER_LOGITS,
                                           _teacher_logits(plan, dist))
  setup = estimator_skeleton.train_setup(settings, dist, ner.num_train_steps,
                                         ner.num_warmup_steps)
  model_fn = distill_model.tagger_model_fn_builder(
      ner.bert_config, len(ner.labels), settings.model.init_checkpoint, dist, setup, ner.use_crf,
      distill.temperature, distill.alpha, plan.matching)
  with estimator_skeleton.worker_estimator("distill", settings, dist, model_fn) as estimator:
    start = estimator_skeleton.training_start(settings, dist, ner.num_train_steps)
    if start is not None:  # steps left (run_distill always has --do_train)
      if dist.is_chief:
        finetuned.write_labels(output_dir, ner.labels)
        student_lib.write_record(output_dir, plan.settings, plan.layer_map)
      estimator_skeleton.train(estimator, settings, dist, arrays, ner.num_train_steps, start)
    if not dist.is_chief:
      return None
    # run_ner's evaluate and predict: the student is an ordinary tagger
    result = ner_run.evaluate(estimator, settings, ner) if settings.mode.do_eval else None
    if settings.mode.do_predict:
      ner_run.predict(estimator, settings, ner)
    return result
