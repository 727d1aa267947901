"""Suite-wide settings. TensorFlow's eager context is shared by every test module in the process:
no test module may call tf.disable_eager_execution() (graph-mode tests build inside
`with tf.Graph().as_default()`), and thread counts are set here once, before any test touches TF."""
import os

import pytest

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("OMP_NUM_THREADS", "1")


def pytest_configure(config):
  del config
  import tensorflow as tf
  tf.config.threading.set_intra_op_parallelism_threads(1)
  tf.config.threading.set_inter_op_parallelism_threads(2)


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
  import sys
  sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures",
                                  "training"))
  import tiny_data  # pylint: disable=import-outside-toplevel
  directory = tmp_path_factory.mktemp("records")
  tiny_data.write_records(str(directory), num_files=2, per_file=16, seq_len=32, max_predictions=5,
                          seed=3)
  return directory
