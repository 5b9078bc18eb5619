"""Kafka's metrics for Prometheus, served by broker and controller processes on
``metrics.listener``: counters kept on the hot path (:mod:`broker.metrics.traffic`), the rest
computed at scrape time from the process's own state (:mod:`broker.metrics.collector`), served
over HTTP (:mod:`broker.metrics.server`). docs/metrics.md lists every metric."""

from broker.metrics.traffic import REQUEST_TIME_BUCKETS_MS, RequestTimes, TopicTraffic, record_count

__all__ = ["REQUEST_TIME_BUCKETS_MS", "RequestTimes", "TopicTraffic", "record_count"]
