"""TLS contexts from Kafka's ``ssl.*`` keys (:mod:`.tls`), SCRAM (:mod:`.scram`), JAAS entries
(:mod:`.jaas`), a client's security from Kafka's client keys (:mod:`.settings`) and the
connector that opens a TLS socket and runs the SASL exchange (:mod:`.connector`)."""
