"""Every bench script runs end to end with --quick (tiny sizes, synthetic inputs) and prints its
figures, so a broken bench fails the suite instead of `make bench`. Parametrized over the files in
bench/: a new bench script is covered automatically and must support --quick (bench/_quick.py)."""
import json
import os
import re
import subprocess
import sys

import pytest

from helpers import REPO

BENCH = os.path.join(REPO, "bench")
SCRIPTS = sorted(name for name in os.listdir(BENCH)
                 if name.endswith(".py") and not name.startswith("_"))
MARKS = {"bench_allreduce.py": [pytest.mark.mpi],  # relaunches itself under mpirun, 2 ranks
         "bench_data_tools_mpi.py": [pytest.mark.mpi, pytest.mark.slow],  # 6 mpirun jobs, ~15 s
         "bench_continue_recipe.py": [pytest.mark.slow],  # ~12 programs: 1-2 minutes
         "bench_pipeline_scale.py": [pytest.mark.slow],  # 14 stage processes, ~40 s
         # several training or fine-tuning programs each: 20-60 s on 2 cores
         **{name: [pytest.mark.slow] for name in (
             "bench_finetune_parity.py", "bench_head_warmup.py", "bench_finetune_pooling.py",
             "bench_training_calls.py", "bench_train_throughput.py", "bench_dynamic_masking.py",
             "bench_ner_crf.py", "bench_serving.py", "bench_judge.py", "bench_distill.py")},
         # several TensorFlow processes or graphs each (a packed and an unpacked training, DALI
         # and tf.data pipelines, a TensorFlow start-up timed): 10-15 s on 2 cores
         **{name: [pytest.mark.slow] for name in (
             "bench_packing.py", "bench_input_pipelines.py", "bench_modeling.py",
             "bench_tfrecord2idx.py")}}
NUMBER = r"[\d.]+"
# The lines each script must print (re.MULTILINE); a script not listed must print a ratio.
FIGURES = {
    "bench_allreduce.py": [r"post accumulation, fp16 compression +%s ms/update +x%s vs baseline"
                           % (NUMBER, NUMBER)],
    "bench_clean.py": [r"^processes=2 .* speed-up x%s" % NUMBER,
                       r"^outputs identical across process counts: True$",
                       r"^control: pure-CPU loop speed-up with 2 processes .* x%s" % NUMBER],
    "bench_continue_recipe.py": [
        r"^%s +%s / %s +%s / %s +%s \+- %s +-$" % ((name,) + (NUMBER,) * 6)
        for name in (r"general \(before\)", "ewc")] + [
            r"^plain +%s / %s +%s / %s +- +-$" % ((NUMBER,) * 4),
            r"^ewc / plain: general masked_lm_loss x%s, domain masked_lm_loss x%s$"
            % (NUMBER, NUMBER)],
    "bench_create_pretraining_data.py": [
        r"^faithful 1 proc +40 +\d+ +%s +\d+ +%sx" % (NUMBER, NUMBER),
        r"^fast, python kernel +40 +\d+ +%s +\d+ +%sx" % (NUMBER, NUMBER),
        r"^fast WWM 2 workers +40 +\d+ +%s +\d+ +%sx" % (NUMBER, NUMBER)],
    "bench_data_tools_mpi.py": [r"^mpirun -np 2, --num_workers 1: +%s s +\(one process / mpirun = "
                                r"%s" % (NUMBER, NUMBER), r"^output files byte-identical: True;"],
    "bench_dynamic_masking.py": [
        r"^static / dynamic: disk %sx, CPU time %sx, wall time %sx" % (NUMBER, NUMBER, NUMBER),
        r"^step BERT-tiny +%s examples/s +-> masking map \d+x the step's need" % NUMBER,
        r"^train dynamic +%s examples/s" % NUMBER,
        r"^training dynamic / static: %sx examples/s \(fastest rounds\); %sx .*; %sx by CPU"
        % (NUMBER, NUMBER, NUMBER)],
    "bench_finetune_parity.py": [
        r"^%s +ours %s +%s +%s \+- %s \(1\) +\d+$" % (task, optimizer, figure, NUMBER, NUMBER)
        for task, figure in (("sentiment", "dev accuracy"), ("ner", "dev entity micro-F1"))
        for optimizer in ("adamweightdecay", "adamw")] + [
            r"^(skipped the transformers rows: .*|ner: ours adamw - transformers = .*: within "
            r"one std: (yes|no))$"],
    "bench_finetune_pooling.py": [r"^mean +%s +%s \+- %s +%s \+- %s +\d/1$" % (checkpoint, NUMBER,
                                                                          NUMBER, NUMBER, NUMBER)
                                  for checkpoint in ("pretrained", "random-init")],
    "bench_judge.py": [r"^finre markers / pair test micro-F1: x%s; markers - pair " % NUMBER,
                       r"^finnl test micro-F1: dev-chosen thresholds %s, fixed 0.5 %s \(1 seeds\): "
                       r"x%s$" % (NUMBER, NUMBER, NUMBER)],
    "bench_head_warmup.py": [r"^final masked_lm_loss head warm-up 2 +%s +\(x%s of no warm-up\)$"
                             % (NUMBER, NUMBER)],
    "bench_input_pipelines.py": [r"^input  DALI \(CPU\) +\d+ examples/s +%sx tf.data" % NUMBER,
                                 r"^resume DALI \(CPU\) +first batch %s s" % NUMBER,
                                 r"^step   BERT-tiny +%s examples/s +-> tf.data \d+x, DALI \d+x"
                                 % NUMBER],
    "bench_modeling.py": [r"^fp32 +%s +1\.00 " % NUMBER, r"^recompute +%s +%s +" % (NUMBER, NUMBER)],
    "bench_near_dup.py": [r"^ours, 1 process +\d+ +%s +%s +%s +\d+ +%s +(%sx|-)$" % ((NUMBER,) * 5),
                          r"^ours, 2 processes +\d+ +%s +%s +%s +0 +%s " % ((NUMBER,) * 4),
                          r"^(datasketch [\d.]+ +\d+ .* 1\.00x|skipped datasketch column: .*)$",
                          r"^clean_corpus --processes 2 .* \+-?%s s/GB \(x%s the run\)" % (
                              NUMBER, NUMBER)],
    "bench_ner_crf.py": [r"^%s +updates +10  dev micro-F1 %s \+- %s  test %s \+- %s " % (
        name, NUMBER, NUMBER, NUMBER, NUMBER) for name in ("softmax", "crf")]
                        + [r"^crf / softmax dev micro-F1 at 10 updates: x%s$" % NUMBER],
    "bench_optimizers.py": [r"^%s +%s ms/update +%sx baseline" % (name, NUMBER, NUMBER)
                            for name in ("tf.train.AdamOptimizer", "adam", "lamb")],
    "bench_packing.py": [r"^news +S=512 lpfhp K=3 +efficiency %s" % NUMBER,
                         r"^synthetic S=512 lpfhp K=3 +efficiency %s" % NUMBER,
                         r"^  packed/unpacked \(wall time\) %s = %s x ideal" % (NUMBER, NUMBER)],
    "bench_pipeline_scale.py": [
        r"^%s +[\d.]+ MB +%s s +%s MB/s +\d+ docs/s +%s cpu s/MB +\d+ MB peak +\d+ MB tree$"
        % (stage, NUMBER, NUMBER, NUMBER) for stage in ("clean", r"clean\+near", "vocab 1",
                                                        "vocab P", "records", "dynamic", "index")]
                               + [r"^  clean\+near  peak RSS x%s \(tree x%s\), time x%s$"
                                  % (NUMBER, NUMBER, NUMBER),
                                  r"^[\d.]+ MB: clean\+near / clean time x%s \(CPU x%s; .* vocab 2 "
                                  r"processes speed-up x%s, vocab identical: True$"
                                  % (NUMBER, NUMBER, NUMBER)],
    "bench_vocab_sample.py": [r"^full corpus +\d+ +%s +%s +100\.0%% +1\.00x$" % (NUMBER, NUMBER),
                              r"^--sample 0\.3 +\d+ +%s +%s +%s%% +%sx" % ((NUMBER,) * 4),
                              r"^--max_docs \d+ +\d+ +%s +%s +%s%% +%sx" % ((NUMBER,) * 4)],
    "bench_tfrecord2idx.py": [r"^ours, in process, verify +%s MB/s +%sx" % (NUMBER, NUMBER),
                              r"^ours, CLI dir --jobs 2 +%s MB/s +%sx" % (NUMBER, NUMBER)],
    "bench_serving.py": [
        r"^1 +32 +%s +%s +%s +%s +%s$" % (path, NUMBER, NUMBER, NUMBER, NUMBER)
        for path in (r"estimator\.predict", "savedmodel text", "savedmodel ids", "onnxruntime",
                     "onnxruntime spin", "onnx client")] + [
            r"^1 +32 +torch transformers +(skipped: no torch|%s +%s +%s +%s)$" % (
                NUMBER, NUMBER, NUMBER, NUMBER),
            r"^ratios b1 s32: estimator\.predict / savedmodel text x%s, estimator\.predict / "
            r"onnxruntime x%s, onnxruntime / savedmodel ids x%s, onnxruntime spin / "
            r"savedmodel ids x%s \(p50\)$" % (NUMBER, NUMBER, NUMBER, NUMBER),
            r"^onnxruntime / savedmodel ids \(p50; below 1: onnxruntime faster\): b1 s32 x%s "
            r"\(cpu x%s\), b2 s32 x%s \(cpu x%s\)$" % (NUMBER, NUMBER, NUMBER, NUMBER)],
    "bench_tokenizer.py": [r"^fast tokenize_batch .* x *%s .* mismatches 0$" % NUMBER,
                           r"^  fast tokenize_words .* x *%s .* mismatches 0$" % NUMBER],
    "bench_train_throughput.py": [r"^baseline( +%s){6} +1\.000 +1\.000$" % NUMBER]
                                 + [r"^%s( +%s){8}$" % (variant, NUMBER)
                                    for variant in ("xla", "google_mask", "google_tpu")],
    "bench_training_calls.py": [r"^  ours +start-up %s s; long %s s, short %s s in \d+ stretch"
                                % (NUMBER, NUMBER, NUMBER)],
    "bench_vocab_trainer.py": [r"^vocab_size 500: HF %ss, ours %ss \(ratio %sx\)"
                               % (NUMBER, NUMBER, NUMBER)],
    "compare_export_hf.py": [r"^bert-fin-export-hf: BertForPreTraining from ",
                             r"^phase 1 \(bert_fin TF\): 5 inputs, logits of mlm_logits, "
                             r"nsp_logits",
                             r"^(RESULT: OK|skipped phase 2 \(transformers\): no Python with "
                             r"torch at .*)$"],
}
ANY_RATIO = r"%s ?x|x ?%s|ratio" % (NUMBER, NUMBER)


@pytest.mark.parametrize("script", [pytest.param(name, marks=MARKS.get(name, []))
                                    for name in SCRIPTS])
def test_quick_run_prints_its_figures(script, tmp_path):
  _assert_quick_run_prints(script, [], FIGURES.get(script, [ANY_RATIO]), tmp_path)


def _assert_quick_run_prints(script, flags, patterns, tmp_path):
  """script --quick FLAGS exits 0 without a traceback and prints a line matching each pattern."""
  # TMPDIR: the scripts' temp dirs (some are kept for inspection) land in pytest's tmp_path; cwd:
  # nothing may be written next to the caller.
  env = dict(os.environ, TMPDIR=str(tmp_path), TF_CPP_MIN_LOG_LEVEL="3")
  proc = subprocess.run([sys.executable, os.path.join(BENCH, script), "--quick"] + flags,
                        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
  report = "%s --quick %s, exit %d\nstdout:\n%s\nstderr:\n%s" % (
      script, " ".join(flags), proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
  assert proc.returncode == 0, report
  assert "Traceback (most recent call last)" not in proc.stdout + proc.stderr, report
  for pattern in patterns:
    assert re.search(pattern, proc.stdout, re.MULTILINE), "no line matches %r\n%s" % (pattern,
                                                                                      report)


def test_every_script_is_covered_and_declares_quick():
  assert len(SCRIPTS) >= 12 and set(FIGURES) <= set(SCRIPTS), sorted(set(FIGURES) - set(SCRIPTS))
  for name in SCRIPTS:
    with open(os.path.join(BENCH, name), encoding="utf-8") as f:
      assert "_quick.parse_args(" in f.read(), "%s: parse its flags with _quick.parse_args" % name


@pytest.mark.slow
@pytest.mark.parametrize("flags, patterns", [
    (["--latency_only", "--task=ner"],  # random-weight CRF taggers through the tagger's export
     [r"^teacher +\d+ params  b1 s32 +%s ms  b32 +%s ms$" % (NUMBER, NUMBER),
      r"^student +\d+ params  b1 s32 +%s ms  b32 +%s ms$" % (NUMBER, NUMBER),
      r"^latency teacher / student: batch 1 x%s, batch 32 x%s$" % (NUMBER, NUMBER)]),
    # students of random init, distilled from an ensemble of two teachers
    (["--student_from=random", "--rows=gold,distilled", "--teachers=2"],
     [r"^gold +\d+ %s \+- %s \(1\) +%s \+- %s \(1\)" % ((NUMBER,) * 4),
      r"^teachers of seeds 1-2: .* their ensemble .* %s, latency x2" % NUMBER,
      r"^distilled / ensemble: %s%% of its test accuracy" % NUMBER,
      r"^distilled - gold: [-+]%s points.*; paired bootstrap 95%% \[[-+]%s, [-+]%s\]$" % (
          (NUMBER,) * 3)])])
def test_bench_distill_quick_variants(flags, patterns, tmp_path):
  _assert_quick_run_prints("bench_distill.py", flags, patterns, tmp_path)
  if "--student_from=random" in flags:  # the student did not start from the teacher's layers
    distill_json, = [os.path.join(root, "distill.json") for root, _, names in os.walk(tmp_path)
                     if "distill.json" in names and root.endswith("distilled-1")]
    with open(distill_json, encoding="utf-8") as f:
      record = json.load(f)
    assert record["layer_map"] is None, f.name
    assert [os.path.basename(d) for d in record["ensemble_dirs"]] == ["teacher-2"], record
