"""State machines without sockets: producer ids and sequences, consumer groups, offsets."""
