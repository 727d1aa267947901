"""run_distill's orchestration: checked teacher and student -> the teacher's logits, once ->
Estimator train of the student -> chief evaluate -> predict. Reads top to bottom: preflight()
builds the Plan, run() does the work.

`preflight(settings, dist)` reads and checks, before anything is written (one-line ValueErrors):
the teacher (--teacher_dir: a checkpoint with a classifier head, labels.txt, its pooling and
long-text options; single- or multi-label, is_multi_label: the student is the same kind; a
run_ner teacher, whose checkpoint has the tagger head
(finetuned.head_kind), is tagger.py's, and so is its Plan in run()), the student
(--student_layers / --layer_map / --student_config / --student_init against the teacher's
config, --bert_config_file), the data (run_classifier's
preflight with the teacher's labels, pooling and long-text options; --unlabeled_file read,
encoded and mixed into the training rows: unlabeled.py) and, when resuming, the
stored teacher logits' fingerprint and distill.json (the losses and the student's origin the
checkpoint was trained with: another is refused). `run(plan, dist)` then:
  student   the chief writes the student's bert_config.json, vocab.txt (--vocab_file's copy)
            and, when it starts from teacher layers, student_init/ (its first weights) into
            --output_dir, once;
  teacher   with alpha > 0, the teacher's logits of every distinct training row (the texts'
            rows the run reads, each once however often the order repeats it), read from
            teacher_logits.npz or computed (Estimator.predict on the teacher) and stored there;
            with --ensemble_dirs each teacher's, stored as one array whose soft targets are
            their mean (teachers.py);
  train     every rank, run_classifier's model on the student config with the distillation loss
            (losses.py; + matching.py's, the teacher's encoder in the step, with --hidden_weight /
            --attention_weight); the files of a run_classifier --output_dir beside the
            checkpoints;
  eval, predict  rank 0, run_classifier's (eval_results.txt, test_results.tsv; a multi-label
            student's thresholds chosen on its own dev probabilities into multi_label.json, as
            run_classifier chooses them: the teacher's are not copied).
The --output_dir is then a fine-tuned run_classifier directory of the student: run_classifier
--do_predict reads it with --bert_config_file=OUTPUT_DIR/bert_config.json, and
tools/export_hf.py, tools/export_serving.py and compare_checkpoints find its bert_config.json
and vocab.txt there without flags.
"""
import collections
import dataclasses
import functools
import os

import numpy as np
import tensorflow.compat.v1 as tf

from bert_fin import tokenization
from bert_fin.finetune import batches
from bert_fin.finetune import estimator_skeleton
from bert_fin.finetune import finetuned
from bert_fin.finetune import label_lists
from bert_fin.finetune.classify import features as features_lib
from bert_fin.finetune.classify import long_text
from bert_fin.finetune.classify import model as classifier
from bert_fin.finetune.classify import multi_label
from bert_fin.finetune.classify import orchestration as classify
from bert_fin.finetune.distill import matching as matching_lib
from bert_fin.finetune.distill import model as distill_model
from bert_fin.finetune.distill import soft_targets
from bert_fin.finetune.distill import student as student_lib
from bert_fin.finetune.distill import tagger
from bert_fin.finetune.distill import teachers as teachers_lib
from bert_fin.finetune.distill import unlabeled

Teacher = collections.namedtuple("Teacher", ["checkpoint", "labels", "pooling", "long_text",
                                             "config", "multi_label"])
Plan = collections.namedtuple("Plan", [
    "settings", "num_train_steps", "num_warmup_steps", "classify", "teacher", "layer_map",
    "train_arrays", "mixed", "fingerprint", "stored_logits", "matching", "ensemble"])
Plan.__doc__ = """settings: the run's (init_checkpoint: the student's first weights, None:
random); classify: run_classifier's Plan of the student (its bert_config, labels, data);
teacher: Teacher; layer_map: the teacher layers the student starts from, None when it does not;
train_arrays: the rows training reads (run_classifier's; with --unlabeled_file those and the
texts' rows, model.LABELLED telling them apart, in a seeded order: unlabeled.gather of mixed);
mixed: unlabeled.Mixed (the distinct rows the teacher reads, their order), None without
--unlabeled_file; fingerprint: soft_targets.fingerprint of teacher and rows
(unlabeled.teacher_rows; None with alpha = 0); stored_logits: float32 [d, L] of those d rows,
read from --output_dir (a resumed run), else None; matching: matching.Matching
(--hidden_weight / --attention_weight: the teacher's encoder in the student's step) or None;
ensemble: [Teacher] of --ensemble_dirs (their soft targets averaged with the teacher's), [] for
none."""


def _say(dist, line):
  if dist.is_chief:
    print("[run_distill] " + line, flush=True)


def is_multi_label(teacher_dir):
  """Whether a run_classifier --output_dir holds a --multi_label classifier: as run_classifier
  reads its saved head (finetuned.read_head: classifier_config.json's "multi_label"), and, for
  a directory saved before that was recorded, as the serving export does (multi_label.json, its
  dev thresholds). ValueError (one line) for a head that reads --entity_markers: the student's
  classifier reads [CLS] alone."""
  head = finetuned.read_head(teacher_dir)
  if head.get("entity_markers"):
    raise ValueError("--teacher_dir %s was fine-tuned with --entity_markers=%s (its head reads "
                     "the markers' states): run_distill distils classifiers without entity "
                     "markers" % (teacher_dir, head["entity_markers"]))
  return bool(head.get("multi_label", os.path.isfile(os.path.join(teacher_dir,
                                                                  multi_label.THRESHOLDS_FILE))))


def read_teacher(teacher_dir, config_file, max_seq_length, checkpoint):
  """Teacher of a run_classifier --output_dir (checkpoint: its classifier checkpoint; single- or
  multi-label); ValueError (one line) for a directory without labels.txt."""
  labels = finetuned.read_labels(teacher_dir)
  if not labels:
    raise ValueError("--teacher_dir %s has no labels.txt: not a run_classifier --output_dir" %
                     teacher_dir)
  pooling = finetuned.read_pooling(teacher_dir) or finetuned.DEFAULT_POOLING
  finetuned.check_model(checkpoint, labels, pooling)
  config = student_lib.teacher_config(config_file, max_seq_length, checkpoint)
  return Teacher(checkpoint, labels, pooling, finetuned.read_long_text(teacher_dir), config,
                 is_multi_label(teacher_dir))


def _with_teacher_choices(settings, teacher):
  """The settings run_classifier's preflight reads: the teacher's labels, pooling, head kind
  (--multi_label) and (each flag not given) long-text options; its checkpoint as the model whose
  fit is said."""
  given = settings.given
  if "pooling" in given and settings.task.pooling != teacher.pooling:
    raise ValueError("--pooling=%s: the teacher in %s pooled %s; the student reads as it does: "
                     "drop the flag" % (settings.task.pooling, teacher.checkpoint,
                                        teacher.pooling))
  if "multi_label" in given and settings.task.multi_label != teacher.multi_label:
    raise ValueError("--multi_label=%s: the teacher in %s is a %s classifier; the student is "
                     "one too: drop the flag" % (
                         settings.task.multi_label, teacher.checkpoint,
                         "multi-label" if teacher.multi_label else "single-label"))
  saved = {key: value for key, value in (teacher.long_text or {}).items()
           if key not in given and value is not None}
  return dataclasses.replace(
      settings, task=dataclasses.replace(settings.task, labels=teacher.labels,
                                         pooling=teacher.pooling,
                                         multi_label=teacher.multi_label),
      documents=dataclasses.replace(settings.documents, **saved),
      model=dataclasses.replace(settings.model, init_checkpoint=teacher.checkpoint),
      given=given | {"pooling"})


def preflight(settings, dist):
  """Everything read and checked before anything is written; returns a Plan."""
  say = functools.partial(_say, dist)
  distill, output_dir = settings.distill, settings.output.output_dir
  if settings.model.init_checkpoint:
    raise ValueError("--init_checkpoint: the student starts from the teacher's layers or "
                     "--student_init; drop the flag")
  if os.path.abspath(output_dir) == os.path.abspath(distill.teacher_dir or ""):
    raise ValueError("--output_dir is --teacher_dir: the student needs a directory of its own")
  checkpoint, kind = teachers_lib.checkpoint_and_kind(distill.teacher_dir)
  if kind == finetuned.TAGGER:
    return tagger.preflight(settings, dist, checkpoint)
  tagger.check_task(settings, kind)
  teacher = read_teacher(distill.teacher_dir, settings.model.bert_config_file,
                         settings.data.max_seq_length, checkpoint)
  members = _ensemble(settings, teacher)
  config, layer_map = student_lib.resolve(distill, teacher.config, settings.data.max_seq_length)
  matching = matching_lib.plan(distill, teacher.config, config, layer_map, teacher.checkpoint)
  student_lib.check_record(output_dir, student_lib.record(settings, layer_map))
  plan = classify.preflight(_with_teacher_choices(settings, teacher), dist)
  init = student_lib.init_checkpoint(settings, layer_map)
  if init and layer_map is None:
    shapes = classifier.variable_shapes(config, len(teacher.labels), settings.data.max_seq_length,
                                        teacher.pooling)
    say(finetuned.describe_restore(finetuned.restore_report(init, shapes)))
  settings = dataclasses.replace(plan.settings, model=dataclasses.replace(
      plan.settings.model, init_checkpoint=init))
  say("student: %d layers, hidden %d%s; teacher: %d layers (%s)" % (
      config.num_hidden_layers, config.hidden_size,
      " from teacher layers %s" % ",".join(map(str, layer_map)) if layer_map is not None else
      " from %s" % init if init else " random init", teacher.config.num_hidden_layers,
      teacher.checkpoint))
  arrays, num_train_steps, mixed = plan.data["train"].arrays, plan.num_train_steps, None
  if distill.unlabeled_file:
    mixed = _with_unlabeled(arrays, settings, plan, dist)
    arrays = unlabeled.gather(mixed)
    num_train_steps, num_warmup_steps = unlabeled.train_steps(settings, mixed, dist, "rows")
    plan = plan._replace(num_warmup_steps=num_warmup_steps)
  print_, stored = None, None
  if distill.alpha > 0:
    rows, covered = unlabeled.teacher_rows(arrays, mixed)
    print_ = soft_targets.fingerprint(teacher.checkpoint, teacher.config.to_json_string(),
                                      covered, [member.checkpoint for member in members],
                                      distill.temperature)
    stored = soft_targets.read(output_dir, print_, [batches.num_rows(rows), len(teacher.labels)])
  return Plan(settings, num_train_steps, plan.num_warmup_steps,
              plan._replace(settings=settings, bert_config=config), teacher, layer_map, arrays,
              mixed, print_, stored, matching, members)


def _ensemble(settings, teacher):
  """[Teacher] of --ensemble_dirs, each checked against the teacher (teachers.members: kind,
  labels, model shape) and of its kind of classifier (single- or multi-label); its own pooling
  and long-text options are read from its directory."""
  checkpoints = teachers_lib.members(settings.distill.ensemble_dirs, settings.distill.teacher_dir,
                                     teacher.checkpoint, finetuned.CLASSIFIER, teacher.labels)
  members = []
  for directory, checkpoint in zip(settings.distill.ensemble_dirs or (), checkpoints):
    member = read_teacher(directory, settings.model.bert_config_file,
                          settings.data.max_seq_length, checkpoint)
    if member.multi_label != teacher.multi_label:
      raise ValueError("--ensemble_dirs: %s is a %s classifier, --teacher_dir's is not: an "
                       "ensemble's teachers share the head's kind" % (
                           directory, "multi-label" if member.multi_label else "single-label"))
    members.append(member)
  return members


def _with_unlabeled(arrays, settings, plan, dist):
  """unlabeled.Mixed of the training rows and --unlabeled_file's (encoded as run_classifier
  reads texts), with model.LABELLED 1 / 0, in unlabeled.row_order (seeded; --unlabeled_weight:
  the texts' share over the whole run; the input's shuffle buffer is bounded)."""
  texts = unlabeled.read(settings.distill.unlabeled_file)
  _say(dist, unlabeled.describe(texts))
  pair = features_lib.first_pair(texts.examples)
  if plan.long_text.mode == long_text.CHUNKS and pair is not None:
    raise label_lists.DataError("%s: %s is a pair (text_b): --long_text=chunks windows single "
                                "texts" % (texts.path, pair.guid))
  tokenizer = tokenization.make_tokenizer(settings.model.vocab_file,
                                         do_lower_case=settings.model.do_lower_case)
  extra = features_lib.encode(texts.examples, plan.labels, tokenizer,
                              settings.data.max_seq_length, plan.long_text).arrays
  if settings.task.multi_label:  # no label set: a placeholder the gold term never reads
    extra[features_lib.LABEL_IDS] = np.zeros([batches.num_rows(extra), len(plan.labels)],
                                             np.int32)
  return unlabeled.mix_for_run(arrays, extra, settings, dist, distill_model.LABELLED,
                               lambda line: _say(dist, line))


def _write_run_files(plan):
  """run_classifier's files beside the checkpoints (its writer: labels.txt,
  classifier_config.json with the head's kind and the tokenizing flags) and
  student.RECORD_FILE."""
  classify.write_run_files(plan.settings, plan.classify)
  student_lib.write_record(plan.settings.output.output_dir, plan.settings, plan.layer_map)


def _teacher_logits(plan, dist):
  """float32 [d, L] of the distinct rows the teacher reads (unlabeled.teacher_rows): stored, or
  computed by the teacher, once a row (the chief stores them; every rank computes its own when
  none are stored)."""
  settings, teacher = plan.settings, plan.teacher
  teachers = [(distill_model.teacher_model_fn(member.config, len(member.labels), member.pooling,
                                              dist, member.multi_label), member.checkpoint)
              for member in [teacher] + plan.ensemble]
  return soft_targets.stored_or_computed(
      plan.stored_logits, teachers, functools.partial(
          teachers_lib.mean_at_temperature, temperature=settings.distill.temperature,
          multi_label=teacher.multi_label),
      unlabeled.teacher_rows(plan.train_arrays, plan.mixed)[0], settings, dist, plan.fingerprint,
      lambda line: _say(dist, line), ("logits", "rows"))


def run(plan, dist):
  """Trains the student (every rank), then the chief evaluates dev and predicts test as
  run_classifier does (run_ner, for a tagger.Plan: tagger.run). Returns the eval result dict, or
  None (no --do_eval, or not the chief)."""
  if isinstance(plan, tagger.Plan):
    return tagger.run(plan, dist)
  settings = plan.settings
  tf.logging.set_verbosity(tf.logging.INFO)
  if dist.is_chief:
    tf.io.gfile.makedirs(settings.output.output_dir)
    student_lib.write_files(settings.output.output_dir, plan.classify.bert_config,
                            settings.model.vocab_file, plan.layer_map, plan.teacher.checkpoint)
  arrays = dict(plan.train_arrays)
  if settings.distill.alpha > 0:
    arrays = unlabeled.with_teacher_logits(arrays, plan.mixed, distill_model.TEACHER_LOGITS,
                                           _teacher_logits(plan, dist))
  distill = settings.distill
  setup = estimator_skeleton.train_setup(settings, dist, plan.num_train_steps,
                                         plan.num_warmup_steps)
  model_fn = distill_model.model_fn_builder(
      plan.classify.bert_config, len(plan.teacher.labels), settings.model.init_checkpoint, dist,
      setup, plan.teacher.pooling, distill.temperature, distill.alpha, plan.teacher.multi_label,
      plan.matching)
  with estimator_skeleton.worker_estimator("distill", settings, dist, model_fn) as estimator:
    start = estimator_skeleton.training_start(settings, dist, plan.num_train_steps)
    if start is not None:  # steps left (run_distill always has --do_train)
      if dist.is_chief:
        _write_run_files(plan)
      estimator_skeleton.train(estimator, settings, dist, arrays, plan.num_train_steps, start)
    if not dist.is_chief:
      return None
    # run_classifier's evaluate and predict: the student is an ordinary classifier
    result = None
    if settings.mode.do_eval:
      result = classify.evaluate(estimator, settings, plan.classify)
    if settings.mode.do_predict:
      classify.predict(estimator, settings, plan.classify)
    return result
