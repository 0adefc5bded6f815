"""The migration engine: runs, phases, tasks, windows, the ledger and rate limits.

It runs on the capsule: one queue job per task, carrying the task id and the run id only.
Everything else is in rows, and the rows are the truth when a job dies.
"""
