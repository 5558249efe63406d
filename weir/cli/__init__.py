"""The ``weir`` command line."""

DEFAULT_DATA_DIR = "./weir-data"  # where ``weir up`` keeps a local cluster (cluster.json)
