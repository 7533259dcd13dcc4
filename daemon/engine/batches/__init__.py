"""The batch runner: offline jobs (OpenAI batch format) run by the daemon, once per line.

:mod:`.batch_desk` is the eternal task and the control commands (``batch_submit``,
``batch_status``, ``batch_pause``, ``batch_resume``, ``batch_cancel``); :mod:`.job_runner`
runs one job; :mod:`.line_sender` sends one request with its retries; :mod:`.crash_points` is
the test hook that kills the process at a chosen step.
"""
