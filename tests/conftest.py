"""Suite-wide settings. TensorFlow's eager context is shared by every test module in the process:
no test module may call tf.disable_eager_execution() (graph-mode tests build inside
`with tf.Graph().as_default()`), and thread counts are set here once, before any test touches TF.

Imports: tests/ is on sys.path (pytest puts this rootdir-less conftest's directory there), so test
modules import the shared helpers as `helpers` (paths such as REPO) and never another test module;
the directories of the tests' stand-alone scripts (fixtures/training: tiny_data; mpi_scripts) are
put first here, once, and the repository last (its top-level programs, e.g. `import
create_pretraining_data`, after whatever bert_fin is installed)."""
import os
import sys

import pytest

_TESTS = os.path.dirname(os.path.abspath(__file__))
for _scripts in (os.path.join(_TESTS, "fixtures", "training"), os.path.join(_TESTS, "mpi_scripts")):
  if _scripts not in sys.path:
    sys.path.insert(0, _scripts)
if os.path.dirname(_TESTS) not in sys.path:
  sys.path.append(os.path.dirname(_TESTS))

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_configure(config):
  del config
  import tensorflow as tf
  tf.config.threading.set_intra_op_parallelism_threads(1)
  tf.config.threading.set_inter_op_parallelism_threads(2)


def pytest_collection_modifyitems(items):
  """The mpirun tests first (stable otherwise): they are the longest, and started last they would
  keep one xdist worker busy after the other has finished."""
  items.sort(key=lambda item: item.get_closest_marker("mpi") is None)


@pytest.fixture
def fresh_graph():
  """Builds the test into its own tf.Graph (graph mode, tf.compat.v1 style); modules opt in with
  `pytestmark = pytest.mark.usefixtures("fresh_graph")`."""
  import tensorflow.compat.v1 as tf
  with tf.Graph().as_default() as graph:
    yield graph


@pytest.fixture(params=["control_flow_v2", "control_flow_v1"])
def control_flow(request):
  """Runs a test with TF2's functional tf.cond and again with TF1's Switch/Merge tf.cond."""
  import tensorflow.compat.v1 as tf
  if request.param == "control_flow_v1":
    tf.disable_control_flow_v2()
  yield request.param
  tf.enable_control_flow_v2()


@pytest.fixture(scope="session")
def records_dir(tmp_path_factory):
  """2 tiny_data record files x 16 records (seq 32, 5 predictions), written once a session."""
  import tiny_data  # pylint: disable=import-outside-toplevel
  directory = tmp_path_factory.mktemp("records")
  tiny_data.write_records(str(directory), num_files=2, per_file=16, seq_len=32, max_predictions=5,
                          seed=3)
  return directory
