"""bert_fin: Chinese domain BERT pretraining in the google-research/bert Estimator style.

Versions are pinned once, in requirements/constraints.txt; the extras below are read from it.
"""
import os
import re

from setuptools import Extension, find_packages, setup

HERE = os.path.dirname(os.path.abspath(__file__))


def read_constraint_groups(path):
  """Returns {group: [pin, ...]} from the `# group: NAME` sections of the constraints file."""
  groups, current = {}, None
  with open(path, encoding="utf-8") as f:
    for line in f:
      line = line.strip()
      match = re.match(r"#\s*group:\s*(\S+)", line)
      if match:
        current = match.group(1)
        groups.setdefault(current, [])
      elif line and not line.startswith("#") and current:
        groups[current].append(line)
  return groups


# The fast data pipeline's record kernel (bert_fin/data/kernel/dispatch.py). optional: without a
# C compiler the install still succeeds and the pipeline falls back to the pure-Python path (same
# bytes).
NSP_KERNEL = Extension(
    "bert_fin.data.kernel._kernel", sources=["bert_fin/data/kernel/_kernel.c"],
    depends=["bert_fin/data/kernel/_kernel_%s.h" % part
             for part in ("random", "crc", "block", "shuffle", "record", "unmasked")],
    extra_compile_args=["-O2", "-std=c99", "-ffp-contract=off"], optional=True)

# MinHash signatures for clean_corpus --near_dup_threshold (bert_fin/text/dedup/near_dup.py);
# optional the same way: without it near_dup.py computes the same values with numpy, slower.
MINHASH = Extension("bert_fin.text.dedup._minhash", sources=["bert_fin/text/dedup/_minhash.c"],
                    extra_compile_args=["-O2", "-std=c99"], optional=True)

GROUPS = read_constraint_groups(os.path.join(HERE, "requirements", "constraints.txt"))

setup(
    name="bert_fin",
    version="0.1.0",
    description="Chinese domain BERT/RoBERTa pretraining: whole-word masking, Horovod, DALI, AMP",
    packages=find_packages(include=["bert_fin", "bert_fin.*"]),
    py_modules=["run_pretraining", "create_pretraining_data", "run_classifier", "run_ner",
                "extract_features", "run_squad"],
    ext_modules=[NSP_KERNEL, MINHASH],
    python_requires=">=3.11,<3.12",
    install_requires=GROUPS["core"],
    extras_require={
        "tf": GROUPS["tf"],
        "gpu": GROUPS["tf-gpu"],
        "dali": GROUPS["dali"] + GROUPS["dali-tf"],
        "horovod": GROUPS["horovod"],
        "mpi": GROUPS["mpi"],
        "serving": GROUPS["serving"],
        "test": GROUPS["test"],
    },
    entry_points={
        "console_scripts": [
            "bert-fin-doctor=bert_fin.doctor:main",
            "bert-fin-create-pretraining-data=create_pretraining_data:console_main",
            "bert-fin-run-pretraining=run_pretraining:console_main",
            "bert-fin-run-classifier=run_classifier:console_main",
            "bert-fin-run-ner=run_ner:console_main",
            "bert-fin-extract-features=extract_features:console_main",
            "bert-fin-run-squad=run_squad:console_main",
            "bert-fin-clean-corpus=bert_fin.cli.clean_corpus:main",
            "bert-fin-shard-corpus=bert_fin.cli.shard_corpus:main",
            "bert-fin-build-vocab=bert_fin.cli.build_vocab:main",
            "bert-fin-export-hf=bert_fin.cli.export_hf:main",
            "bert-fin-export-serving=bert_fin.cli.export_serving:main",
            "bert-fin-import-hf=bert_fin.cli.import_hf:main",
            "bert-fin-adapt-vocab=bert_fin.cli.adapt_vocab:main",
            "tfrecord2idx=bert_fin.cli.tfrecord2idx:main",
            "bert-fin-pack-records=bert_fin.cli.pack_records:main",
            "bert-fin-compare-checkpoints=bert_fin.cli.compare_checkpoints:main",
            "bert-fin-estimate-fisher=bert_fin.cli.estimate_fisher:main",
        ],
    },
)
