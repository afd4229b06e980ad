"""How a run's work is dealt: its units, `--shard`'s dealing of them and their cost (sharding), the
xdist scheduler that spreads a metric's cases over the workers a seed image at a time, each worker
building each model once (metric_groups), and how many workers `-n auto` starts (worker_count).
"""
