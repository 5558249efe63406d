"""The ``weir`` command line."""

DEFAULT_DATA_DIR = "./weir-data"  # where ``weir up`` keeps a local cluster (cluster.json)


def bootstrap_servers(text: str) -> str:
    """The argparse type of ``--bootstrap-server``: an empty value (``--bootstrap-server ""``,
    an unset shell variable) is a usage error, never a silent fall back to ``--data-dir``."""
    import argparse

    if not text.strip(" ,"):
        raise argparse.ArgumentTypeError("expected HOST:PORT[,HOST:PORT...], got an empty value")
    return text
