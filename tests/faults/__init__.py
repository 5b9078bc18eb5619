"""The fault harness of issue 18: a cluster under faults, its history and the checker.

``net`` puts hosts in network namespaces of their own and cuts, drops, delays and resets the
links between them; ``history`` records what the workload, the faults and an outside auditor
of the coordinator saw (a JSONL file); ``checker`` judges a history against the logs read back
at the end.
"""
