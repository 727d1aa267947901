"""What several test modules share: the repository's paths here; in modules named for what they
hold: google_checkpoints (google-named checkpoints written by hand), random_checkpoints,
modeling_toys (the tiny config, a 1-thread session, random weights), reference_bert_numpy (the
float64 oracle of the model), tokenizer_vocab, pretraining_runs (run_pretraining flags, runs and
subprocesses), resume_runs (kill -9 and exact-resume runs), finetune_toys (the toy classification /
NER tasks, step lines), data_tools, graph_datasets (tf.data read in graph mode), ranks,
fake_cluster, settings_tables, hostile_folders (hand-built hostile transformers folders). Test modules import `helpers` (the tests/ directory is on
sys.path: pytest's rootdir-less conftest.py puts it there), never another test module. The
directories of the tests' stand-alone scripts (fixtures/training: tiny_data, mpi_train.py;
mpi_scripts) are put on sys.path once, by conftest.py."""
import os

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPO = os.path.dirname(TESTS)
FIXTURES = os.path.join(TESTS, "fixtures")
TRAINING_FIXTURES = os.path.join(FIXTURES, "training")
PRETRAINING_FIXTURES = os.path.join(FIXTURES, "pretraining")
MPI_SCRIPTS = os.path.join(TESTS, "mpi_scripts")
