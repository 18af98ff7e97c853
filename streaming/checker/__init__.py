"""The checker: one pre-condition checker per detector stream, alerts and statuses out to viewers.

`core` applies detector messages (one handler per kind) without sockets; `streams` keeps each stream and its life
cycle; `budget` shares a poll among streams; `outputs` builds what goes out; `schedule` says what is re-sent when;
`refusals` counts and logs what is turned away; `config` holds the settings; `service` puts the sockets and the loop
around the core (``stream-detect checker``), and `process` runs it in a child process (the all-in-one run).
"""
