"""Broker-free evaluation for `lychee bench`: metrics, raw-turn baselines, reports, plots.

Nothing here talks to Kafka or Redis, so every number the benchmark prints can be
recomputed (and unit-tested) from rankings alone.
"""
