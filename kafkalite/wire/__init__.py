"""The Kafka protocol without I/O: frames, headers, codecs, record-batch validation."""
