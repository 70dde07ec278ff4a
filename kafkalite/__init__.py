"""kafkalite: a lightweight Apache Kafka-compatible broker."""

__version__ = "0.1.0"
