"""The ``weir`` command line."""

DEFAULT_DATA_DIR = "./weir-data"  # where ``weir up`` keeps a local cluster (cluster.json)


def bootstrap_servers(text: str) -> str:
    """The argparse type of ``--bootstrap-server``: an empty value (``--bootstrap-server ""``,
    an unset shell variable) is a usage error, never a silent fall back to ``--data-dir``."""
    import argparse

    if not text.strip(" ,"):
        raise argparse.ArgumentTypeError("expected HOST:PORT[,HOST:PORT...], got an empty value")
    return text


def int32(text: str) -> int:
    """The argparse type of options sent as a Kafka INT32 (partitions, a partition, a
    replication factor): a number past 2147483647 is a usage error, not an OverflowError
    from the request encoder."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if not -(2**31) <= value < 2**31:
        raise argparse.ArgumentTypeError(f"{value} is beyond a 32-bit integer (Kafka's INT32)")
    return value
