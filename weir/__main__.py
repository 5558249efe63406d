"""``python -m weir``: the same as the ``weir`` command.

``python -m weir broker start --config FILE`` (how local clusters start their brokers)
goes straight to :mod:`weir.cli.broker_start`, without loading the other commands.
"""

import sys

from weir.cli.broker_start import fast_path_config, start_broker

if __name__ == "__main__":
    config = fast_path_config(sys.argv[1:])
    if config is not None:
        sys.exit(start_broker(config))
    from weir.cli.main import main

    sys.exit(main())
