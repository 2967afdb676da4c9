"""Pushes: a talk's final captions posted to places the speaker names (API.md, "Pushes").

``start`` may carry ``outputs``: YouTube Live's closed-caption ingestion
(``youtube.py``) and signed JSON webhooks (``webhook.py``). Each is parsed and checked at
``start`` (``config.py``), against the hosts the operator allows (``allow.py``, ``serve
--output-allow-host``); the connection checks every address it connects to again
(``net.py``: resolve, check, connect to the checked address), so a DNS name cannot lead
the server into its own network. Delivery (``delivery.py``) runs one bounded queue and
one worker per output, with retries and backoff for a bounded time: the caption path
only appends to a queue, so no output ever delays a caption or another output.
``flushes.py`` keeps an ended talk's deliveries, which the server's shutdown awaits.

Pushes have no route of their own: ``start`` names them. What of the feature lives outside
this package, and why: ``app.live.messages`` checks ``start``'s ``outputs`` with
``config.py``; a speaker's 'start' opens a talk's pushes (``app.live.start``)
and ``app.server`` waits for the flushes at shutdown; the ``output_*`` settings
(``--output-allow-host``, ``--output-timeout-s``, ``--output-retry-s``) are in
``app.settings`` with the other flags; the ``livetrans_output_*`` metrics are the API
layer's (``app.api.metrics``). The tests are ``tests/app/live/outputs/``.
"""
