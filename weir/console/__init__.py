"""``weir console``: a small web console over the Kafka protocol, ZooKeeper and the brokers'
metrics endpoints (aiohttp server in ``server.py``, reads in ``collect.py``, the page in
``static/``)."""
