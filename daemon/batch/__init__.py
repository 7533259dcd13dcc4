"""Offline batch jobs in the OpenAI batch format: the parts that need no event loop.

An input file is read and validated whole (:mod:`.input_file`); each line's result becomes one
line of the output or errors file (:mod:`.result_lines`), appended and made durable by
:mod:`.result_files`, which also reconciles a file left by a crash. What is retried and when
(:mod:`.retries`) and the progress shown to people (:mod:`.progress`) are pure functions. The
engine (``daemon.engine.batches``) runs jobs with these parts and a ledger in the state
database.
"""
