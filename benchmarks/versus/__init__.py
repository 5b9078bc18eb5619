"""partctl side by side with Apache Kafka on this machine (``benchmarks/versus_kafka.py``): the
systems (:mod:`.systems`), the loads (:mod:`.java`, :mod:`.rdkafka`), the rows (:mod:`.rows`)
and the table, its ratios and targets (:mod:`.table`)."""
