"""The data pipeline at three corpus sizes: time, MB/s, documents/s and peak memory of each stage,
and how much each grows with the corpus (what a user's corpus will cost, docs/data.md).

  python bench/bench_pipeline_scale.py [--sizes 5,55,550] [--input FILE_OR_DIR ...]
                                       [--processes 2] [--stages ...] [--work_dir DIR] [--quick]
For each size (MB) a perturbed corpus is made from --input (default: samples/corpus; any text
clean_corpus reads, e.g. the reviews of ../shared/corpora beside the checkout): documents of
sentences drawn across the whole source with a seeded generator, digits and company names
(samples/user_dict.txt) substituted, lengths varied, 3% of them reprinted later with another
header (bench/_perturbed_corpus.py). Then each stage runs as its own process, through a small
wrapper that reports resource.getrusage(RUSAGE_CHILDREN) (the peak RSS of the largest process of
the stage, its workers included, and the CPU seconds), while this script samples the RSS summed
over the stage's process tree every 0.1 s:
  clean        tools/clean_corpus.py --processes P
  clean+near   the same with --near_dup_threshold 0.8
  vocab 1      tools/build_vocab.py --processes 1 (on clean+near's output)
  vocab P      tools/build_vocab.py --processes P (its vocab.txt must be byte-identical)
  records      create_pretraining_data.py, whole-word masking with samples/user_dict.txt,
               --num_workers P, --dupe_factor D, S=128
  dynamic      the same with --masking=dynamic
  index        tools/tfrecord2idx.py over the dynamic records (DALI's index)
Prints a row per stage and size (seconds, MB/s and documents/s of the corpus, CPU seconds per
MB, peak RSS of the largest process and of the tree), the growth of each stage's peak RSS and
time from one size to the next (the corpus grows by the ratio of the sizes), clean+near / clean
time and the vocab's speed-up on P processes, with the load average before and after, and a
control: the speed-up of a pure-CPU loop on P processes (what the machine allows; the vocab's
speed-up is also printed as a share of it). With
--work_dir the corpora, outputs and figures stay there and a rerun resumes at the stage a killed
run stopped at (a 10 GB run takes hours).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import psutil

import _perturbed_corpus
import _quick
from _cpu_control import cpu_headroom

REPO = _perturbed_corpus.REPO
QUICK = dict(sizes="0.15,0.45", dupe_factor=1, vocab_size=400, control_loop=3 * 10**5)
# the wrapper a stage runs in: the stage's RUSAGE_CHILDREN, as JSON, to the file argv[1]
WRAPPER = """
import json, resource, subprocess, sys, time
start = time.perf_counter()
code = subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL).returncode
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "w") as f:
  json.dump({"code": code, "seconds": time.perf_counter() - start, "max_rss_kb": usage.ru_maxrss,
             "cpu": usage.ru_utime + usage.ru_stime}, f)
"""
STAGES = ("clean", "clean+near", "vocab 1", "vocab P", "records", "dynamic", "index")


def run_stage(command, work_dir):
  """Runs command (a list) in the wrapper; returns its report dict plus tree_rss_mb (the peak of
  the RSS summed over the wrapper's descendants, sampled every 0.1 s)."""
  report_path, log_path = os.path.join(work_dir, "stage.json"), os.path.join(work_dir, "stage.log")
  env = dict(os.environ, OMP_NUM_THREADS="1", TF_CPP_MIN_LOG_LEVEL="3",
             TOKENIZERS_PARALLELISM="false")
  with open(log_path, "w", encoding="utf-8") as log:
    proc = subprocess.Popen([sys.executable, "-c", WRAPPER, report_path] + command, env=env,
                            stderr=log)
    wrapper, tree_peak = psutil.Process(proc.pid), 0
    while proc.poll() is None:
      try:
        tree_peak = max(tree_peak, sum(p.memory_info().rss
                                       for p in wrapper.children(recursive=True)))
      except psutil.Error:
        pass
      time.sleep(0.1)
  with open(report_path, encoding="utf-8") as f:
    report = json.load(f)
  if proc.returncode or report["code"]:
    with open(log_path, encoding="utf-8") as f:
      raise RuntimeError("%s failed:\n%s" % (" ".join(command), f.read()[-3000:]))
  report["tree_rss_mb"] = tree_peak / 2**20
  report["max_rss_mb"] = report["max_rss_kb"] / 1024
  return report


def stage_commands(args, corpus, out):
  """{stage: command} for one corpus directory; outputs under `out`."""
  python = sys.executable
  clean = [python, os.path.join(REPO, "tools", "clean_corpus.py"), "--no_progress",
           "--processes", str(args.processes), corpus]
  vocab = [python, os.path.join(REPO, "tools", "build_vocab.py"), "--vocab_size",
           str(args.vocab_size), os.path.join(out, "near.jsonl")]
  create = [python, os.path.join(REPO, "create_pretraining_data.py"),
            "--input_file=%s" % os.path.join(out, "near.jsonl"),
            "--vocab_file=%s" % os.path.join(out, "vocab_P.txt"), "--do_lower_case",
            "--do_whole_word_mask", "--user_dict=%s" % args.user_dict, "--max_seq_length=128",
            "--max_predictions_per_seq=20", "--dupe_factor=%d" % args.dupe_factor,
            "--num_output_files=4", "--num_workers=%d" % args.processes, "--noprogress"]
  return {
      "clean": clean + ["--output", os.path.join(out, "clean.jsonl")],
      "clean+near": clean + ["--near_dup_threshold", "0.8", "--output",
                             os.path.join(out, "near.jsonl")],
      "vocab 1": vocab + ["--processes", "1", "--output", os.path.join(out, "vocab_1.txt")],
      "vocab P": vocab + ["--processes", str(args.processes), "--output",
                          os.path.join(out, "vocab_P.txt")],
      "records": create + ["--output_file=%s" % os.path.join(out, "static", "train")],
      "dynamic": create + ["--masking=dynamic",
                           "--output_file=%s" % os.path.join(out, "dynamic", "train")],
      "index": [python, os.path.join(REPO, "tools", "tfrecord2idx.py"), "--jobs",
                str(args.processes), os.path.join(out, "dynamic")],
  }


def _load(path, default):
  if not os.path.exists(path):
    return default
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def _save(path, value):
  with open(path + ".tmp", "w", encoding="utf-8") as f:
    json.dump(value, f)
  os.replace(path + ".tmp", path)


def measure_size(args, sentences, names, size_mb, work_dir):
  """{stage: report} for one corpus size, plus the corpus's bytes and documents. The corpus and
  each stage's report are kept in work_dir/size-<MB> (a rerun with the same --work_dir reuses
  them: a killed run resumes at its stage)."""
  size_dir = os.path.join(work_dir, "size-%s" % size_mb)
  corpus, out = os.path.join(size_dir, "corpus"), os.path.join(size_dir, "out")
  made = _load(os.path.join(size_dir, "corpus.json"), None)
  if made is None:
    for path in (corpus, out):
      shutil.rmtree(path, ignore_errors=True)
    os.makedirs(out)
    paths, documents, reprints = _perturbed_corpus.make_corpus(
        sentences, names, corpus, int(size_mb * 2**20), seed=args.seed)
    made = {"files": len(paths), "bytes": sum(os.path.getsize(p) for p in paths),
            "documents": documents, "reprints": reprints}
    _save(os.path.join(size_dir, "corpus.json"), made)
  corpus_bytes, documents = made["bytes"], made["documents"]
  print("size %s MB: %d files, %.1f MB, %d documents (%d reprints)" % (
      size_mb, made["files"], corpus_bytes / 1e6, documents, made["reprints"]), flush=True)
  saved_path = os.path.join(size_dir, "stages.json")
  reports = _load(saved_path, {})
  for stage, command in stage_commands(args, corpus, out).items():
    if stage in args.stages:
      if stage not in reports:
        reports[stage] = run_stage(command, size_dir)
        _save(saved_path, reports)
      row(stage, size_mb, reports[stage], corpus_bytes, documents)
  reports = {stage: report for stage, report in reports.items() if stage in args.stages}
  if {"vocab 1", "vocab P"} <= set(reports):
    with open(os.path.join(out, "vocab_1.txt"), "rb") as one, \
        open(os.path.join(out, "vocab_P.txt"), "rb") as many:
      reports["vocab identical"] = one.read() == many.read()
  if "clean+near" in reports:
    with open(os.path.join(out, "near.jsonl.stats.json"), encoding="utf-8") as f:
      reports["near removed"] = json.load(f)["filtered"].get("near_duplicate", 0)
  reports["bytes"], reports["documents"] = corpus_bytes, documents
  return reports


def row(stage, size_mb, report, corpus_bytes, documents):
  seconds = report["seconds"]
  print("%-11s %8s MB %8.1f s %7.2f MB/s %8.0f docs/s %7.2f cpu s/MB %7.0f MB peak %7.0f MB tree"
        % (stage, size_mb, seconds, corpus_bytes / 1e6 / seconds, documents / seconds,
           report["cpu"] / (corpus_bytes / 1e6), report["max_rss_mb"], report["tree_rss_mb"]),
        flush=True)


def summary(sizes, results, processes, control):
  """The growth of each stage from one size to the next, and the two ratios; the vocab's
  speed-up also as a share of `control`, a pure-CPU loop's speed-up on the same processes."""
  for (small, a), (large, b) in zip(zip(sizes, results), zip(sizes[1:], results[1:])):
    corpus = b["bytes"] / a["bytes"]
    print("growth %s -> %s MB (corpus x%.1f):" % (small, large, corpus))
    for stage in [stage for stage in STAGES if stage in a]:
      print("  %-11s peak RSS x%.2f (tree x%.2f), time x%.2f" % (
          stage, b[stage]["max_rss_mb"] / a[stage]["max_rss_mb"],
          b[stage]["tree_rss_mb"] / max(a[stage]["tree_rss_mb"], 1e-9),
          b[stage]["seconds"] / a[stage]["seconds"]))
  for size, result in zip(sizes, results):
    if not {"clean", "clean+near", "vocab identical"} <= set(result):
      continue
    speed_up = result["vocab 1"]["seconds"] / result["vocab P"]["seconds"]
    print("%s MB: clean+near / clean time x%.2f (CPU x%.2f; %d near duplicates removed); vocab "
          "%d processes speed-up x%.2f, vocab identical: %s" % (
              size, result["clean+near"]["seconds"] / result["clean"]["seconds"],
              result["clean+near"]["cpu"] / result["clean"]["cpu"], result["near removed"],
              processes, speed_up, result["vocab identical"]))
    print("  vocab speed-up / the pure-CPU loop's x%.2f: %.2f" % (control, speed_up / control))


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--sizes", default="5,55,550", help="corpus sizes in MB, comma-separated")
  parser.add_argument("--input", nargs="+", default=[os.path.join(REPO, "samples", "corpus")],
                      help="text the corpus is made from (files or directories)")
  parser.add_argument("--text_format", default="blank_line",
                      help="clean_corpus --text_format of --input (line for the reviews)")
  parser.add_argument("--text_field", default="content", help="JSONL text field of --input")
  parser.add_argument("--user_dict", default=os.path.join(REPO, "samples", "user_dict.txt"))
  parser.add_argument("--processes", type=int, default=2)
  parser.add_argument("--dupe_factor", type=int, default=2)
  parser.add_argument("--vocab_size", type=int, default=21128)
  parser.add_argument("--seed", type=int, default=0)
  parser.add_argument("--control_loop", type=int, default=3 * 10**6,
                      help="iterations of each of the 4 tasks of the pure-CPU control (the "
                           "speed-up the machine allows, printed before the summary)")
  parser.add_argument("--stages", default=",".join(STAGES),
                      help="the stages to run, comma-separated (a stage reads the outputs of "
                           "the ones before it: clean+near's output, vocab P's vocab)")
  parser.add_argument("--work_dir", default=None,
                      help="keep the corpora, outputs and each stage's figures here; a rerun "
                           "with the same directory resumes where a killed run stopped "
                           "(default: a temp directory, removed)")
  args = _quick.parse_args(parser, argv, QUICK)
  args.stages = args.stages.split(",")
  unknown = sorted(set(args.stages) - set(STAGES))
  if unknown:
    parser.error("--stages: unknown %s; the stages are %s" % (", ".join(unknown),
                                                               ", ".join(STAGES)))
  sizes = [float(size) if "." in size else int(size) for size in args.sizes.split(",")]
  work_dir = args.work_dir or tempfile.mkdtemp(prefix="bench_pipeline_scale-")
  os.makedirs(work_dir, exist_ok=True)
  try:
    sentences = _perturbed_corpus.source_sentences(args.input, work_dir, args.text_format,
                                                   args.text_field)
    names = _perturbed_corpus.company_names(args.user_dict)
    print("source: %d distinct sentences, %d company names; processes %d; load average %.1f"
          % (len(sentences), len(names), args.processes, os.getloadavg()[0]), flush=True)
    before = cpu_headroom(args.processes, n=args.control_loop)
    results = [measure_size(args, sentences, names, size, work_dir) for size in sizes]
    after = cpu_headroom(args.processes, n=args.control_loop)
    print("control: a pure-CPU loop on %d processes runs x%.2f (before) / x%.2f (after) the "
          "speed of one on this machine" % (args.processes, before, after))
    summary(sizes, results, args.processes, (before + after) / 2)
    print("load average after: %.1f" % os.getloadavg()[0])
  finally:
    if not args.work_dir:
      shutil.rmtree(work_dir, ignore_errors=True)


if __name__ == "__main__":
  main()
