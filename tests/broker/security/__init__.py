"""Broker tests: TLS, SASL (the authenticator), SCRAM, ACLs, sensitive configs, locked-down coordinators."""
