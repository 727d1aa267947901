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
