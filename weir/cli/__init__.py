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


def no_cluster_in(data_dir: object, other: str = "--bootstrap-server") -> str:
    """What a command run where no ``weir up`` cluster lives says: the directory it looked
    in, absolute (a newcomer in another directory sees which), and the ways out."""
    from pathlib import Path

    return (f"no cluster recorded in {Path(str(data_dir)).resolve()} (weir up starts one "
            f"there; --data-dir names the directory of one), or use {other}")
