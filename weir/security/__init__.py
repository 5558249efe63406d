"""Security: authentication and authorization.

- TLS: ``tls.py`` (contexts from Kafka's PEM keys, principals of client certificates),
  ``certs.py`` (a local CA for ``weir up --secure`` and the tests).
- SASL: ``scram.py``, ``plain.py``, ``jaas.py`` (mechanisms and login-module options),
  ``session.py`` (one connection's authentication state), ``listeners.py`` (each listener's
  settings), ``credentials.py`` (SCRAM credentials in ZooKeeper), ``client.py`` (the broker's
  own client authenticating on the inter-broker listener).
- Authorization: ``acls.py``, ``acl_store.py``, ``authorizer.py`` (Kafka's AclAuthorizer).

A layer above ``weir.protocol`` and below the broker: the broker's protocol client gets its
TLS context and SASL exchange from here as an object it is handed, without importing it.
"""
